'use strict'
// An rmqha slave embedded in Node: replicates a master's CommitLog and prints its progress
// and the newest messages it holds, until Ctrl-C, then closes gracefully.
//
//   node examples/node/slave.js --master HOST:HA_PORT [--interval MS]
//                               [--dir DIR (default: a temporary one, removed at exit)]

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { setTimeout: sleep } = require('node:timers/promises')
const { parseArgs } = require('node:util')

// In your own project: require('rmqha')
const rmqha = require('../../node')

const { values: args } = parseArgs({
  options: {
    master: { type: 'string' },
    dir: { type: 'string' },
    interval: { type: 'string', default: '1000' },
  },
})

async function main() {
  if (!args.master) throw Object.assign(new Error('--master HOST:HA_PORT is required'), { code: 'USAGE' })
  // A store of our own (no --dir) is removed once the slave is closed.
  const ownDir = args.dir ? null : fs.mkdtempSync(path.join(os.tmpdir(), 'rmqha-slave-'))
  const dir = args.dir ?? ownDir
  const slave = await rmqha.startSlave({
    storePathRootDir: dir,
    brokerRole: 'SLAVE',
    brokerId: 1,
    haMasterAddress: args.master, // the master's HA port, not its remoting port
    bindAddress: '127.0.0.1',
    brokerIP1: '127.0.0.1',
    listenPort: 0,
    mappedFileSizeCommitLog: 1024 * 1024, // must match the master's
  })
  console.log(`slave replicating from ${args.master}, listening on port ${slave.listenPort()}, store ${dir}`)

  let stopping = false
  let last = -1
  let next = 0 // next ConsumeQueue offset to show
  const watch = async () => {
    while (!stopping) {
      const o = slave.offsets()
      if (o.maxOffset !== last) {
        last = o.maxOffset
        console.log(`slave at offset ${o.maxOffset} (acked ${o.slaveAckOffset}, connected: ${o.connected})`)
      }
      const got = await slave.getMessages('ExampleTopic', 0, next, 16)
      for (const m of got.messages) {
        console.log(`  replicated: ${m.body.toString()} [${m.keys.join(' ')}]`)
        next = m.queueOffset + 1
      }
      await sleep(Number(args.interval))
    }
  }

  const stop = async () => {
    stopping = true
    await slave.close()
    console.log('closed')
    if (ownDir) {
      fs.rmSync(ownDir, { recursive: true, force: true })
      console.log(`removed ${ownDir}`)
    }
  }
  process.once('SIGINT', stop)
  process.once('SIGTERM', stop)
  await watch().catch((e) => {
    if (e.code !== 'CLOSED') throw e
  })
}

main().catch((e) => {
  console.error(`${e.code ?? 'ERROR'}: ${e.message}`)
  process.exitCode = 1
})
