'use strict'
// Run by exit.test.js: SYNC_FLUSH puts are issued and nothing else is awaited. The pending
// promises alone must keep the process alive until rmqha's flush thread settles them; the
// broker is never closed (its finalizer shuts it down as the process ends).

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const rmqha = require('..')
const { brokerConfig } = require('./helpers')

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rmqha-node-pending-'))
  const broker = await rmqha.startMaster(brokerConfig(dir, 'ASYNC_MASTER', { flushDiskType: 'SYNC_FLUSH' }))
  const statuses = {}
  for (let i = 0; i < 100; i++) {
    broker.putMessage('Pending', `m${i}`).then((r) => (statuses[r.status] = (statuses[r.status] || 0) + 1))
  }
  process.on('exit', () => {
    fs.rmSync(dir, { recursive: true, force: true })
    console.log(JSON.stringify(statuses))
  })
}

main().catch((e) => {
  console.error(e)
  process.exitCode = 1
})
