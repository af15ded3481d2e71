'use strict'
// An rmqha master embedded in Node: puts a message every --interval ms and prints each
// answer, until Ctrl-C (or --messages puts), then closes gracefully.
//
//   node examples/node/master.js [--dir DIR (default: a temporary one, removed at exit)] [--role SYNC_MASTER|ASYNC_MASTER]
//                                [--config broker.properties] [--interval MS] [--messages N]
//
// Start examples/node/slave.js with the HA port this prints. On a SYNC_MASTER a put is
// PUT_OK once the slave has acked it; with no slave connected it is SLAVE_NOT_AVAILABLE
// (stored, but not replicated).

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { parseArgs } = require('node:util')

// In your own project: require('rmqha')
const rmqha = require('../../node')

const { values: args } = parseArgs({
  options: {
    dir: { type: 'string' },
    role: { type: 'string', default: 'SYNC_MASTER' },
    config: { type: 'string' },
    interval: { type: 'string', default: '1000' },
    messages: { type: 'string' },
  },
})

async function main() {
  // A store of our own (no --dir, no --config) is removed once the master is closed.
  const ownDir = args.config || args.dir ? null : fs.mkdtempSync(path.join(os.tmpdir(), 'rmqha-master-'))
  // A properties file, or RocketMQ keys in an object: the same names either way.
  const config = args.config
    ? await rmqha.loadProperties(args.config)
    : {
        storePathRootDir: args.dir ?? ownDir,
        brokerRole: args.role,
        bindAddress: '127.0.0.1',
        brokerIP1: '127.0.0.1',
        listenPort: 0, // 0: let the OS pick; listenPort() says which
        haListenPort: 0,
        mappedFileSizeCommitLog: 1024 * 1024,
      }
  const master = await rmqha.startMaster(config)
  console.log(
    `master ${master.role()} listening on port ${master.listenPort()}, HA port ${master.haPort()}, ` +
      `store ${config.storePathRootDir}`,
  )
  console.log(`start a slave: node examples/node/slave.js --master 127.0.0.1:${master.haPort()}`)

  let n = 0
  const limit = args.messages === undefined ? Infinity : Number(args.messages)
  let stopping = false
  const stop = async () => {
    if (stopping) return
    stopping = true
    clearInterval(timer)
    // Puts still waiting for a slave settle before close() resolves.
    await master.close()
    console.log('closed')
    if (ownDir) {
      fs.rmSync(ownDir, { recursive: true, force: true })
      console.log(`removed ${ownDir}`)
    }
  }
  const timer = setInterval(async () => {
    if (n >= limit) return stop()
    const i = ++n
    try {
      // Resolves when the put is final for the role; the event loop keeps running meanwhile.
      const r = await master.putMessage('ExampleTopic', `hello #${i} at ${new Date().toISOString()}`, {
        tags: 'example',
        keys: [`order-${i}`],
      })
      const slaves = master.offsets().slaves.map((s) => `${s.addr} acked ${s.ackOffset}`)
      console.log(`put #${i} ${r.status} at offset ${r.phyOffset} id ${r.msgId}; slaves: [${slaves.join(', ')}]`)
    } catch (e) {
      if (e.code !== 'CLOSED') console.error(`put #${i} failed: ${e.code}: ${e.message}`)
    }
  }, Number(args.interval))
  process.once('SIGINT', stop)
  process.once('SIGTERM', stop)
}

main().catch((e) => {
  console.error(`${e.code ?? 'ERROR'}: ${e.message}`)
  process.exitCode = 1
})
