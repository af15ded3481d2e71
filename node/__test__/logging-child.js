'use strict'
// Run by logging.test.js: a master whose HA port gets a "slave" asking for an offset far past
// the master's end. The master's connection thread refuses it and logs why, off the JS thread.

const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')

const rmqha = require('..')
const { brokerConfig } = require('./helpers')

async function main() {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'rmqha-node-log-'))
  const master = await rmqha.startMaster(brokerConfig(path.join(root, 'm'), 'ASYNC_MASTER'))
  const sock = net.connect(master.haPort(), '127.0.0.1')
  await new Promise((resolve, reject) => sock.once('connect', resolve).once('error', reject))
  const report = Buffer.alloc(8)
  report.writeBigInt64BE(1n << 40n)
  sock.write(report)
  sock.on('error', () => {}) // the master closes it
  const deadline = Date.now() + 10000
  while (master.offsets().refusedSlaves.length === 0) {
    if (Date.now() > deadline) throw new Error('the master did not refuse the slave')
    await new Promise((r) => setTimeout(r, 10))
  }
  sock.destroy()
  await master.close()
  fs.rmSync(root, { recursive: true, force: true })
  console.log('done')
}

main().catch((e) => {
  console.error(e)
  process.exitCode = 1
})
