'use strict'
// Run by exit.test.js: a SYNC_MASTER and a slave in this process, puts in flight, then
// close(). The process must end by itself, without process.exit().

const os = require('node:os')
const path = require('node:path')
const fs = require('node:fs')

const rmqha = require('..')
const { brokerConfig } = require('./helpers')

async function main() {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'rmqha-node-exit-'))
  const master = await rmqha.startMaster(brokerConfig(path.join(root, 'm'), 'SYNC_MASTER'))
  const slave = await rmqha.startSlave(
    brokerConfig(path.join(root, 's'), 'SLAVE', { haMasterAddress: `127.0.0.1:${master.haPort()}` }),
  )
  const deadline = Date.now() + 10000
  while (!master.offsets().slaves.some((s) => s.transferring)) {
    if (Date.now() > deadline) throw new Error('the slave did not connect')
    await new Promise((r) => setTimeout(r, 10))
  }
  const results = await Promise.all(Array.from({ length: 200 }, (_, i) => master.putMessage('Exit', `m${i}`)))
  const ok = results.filter((r) => r.status === 'PUT_OK').length
  // A put still waiting for an ack when the master closes is settled by close().
  await slave.close()
  const late = master.putMessage('Exit', 'late')
  await master.close()
  const lateResult = await late.then((r) => r.status, (e) => e.code)
  fs.rmSync(root, { recursive: true, force: true })
  console.log(JSON.stringify({ ok, late: lateResult }))
}

main().catch((e) => {
  console.error(e)
  process.exitCode = 1
})
