'use strict'
// Run by worker.test.js: a broker inside a worker thread whose environment ends while
// putMessage promises are pending, either by process.exit() in the worker or by terminate()
// from the main thread. The process must survive that; then the main thread reopens the same
// store (its lock released, its records recovered) and reports what it found.

const { Worker, isMainThread, parentPort, workerData } = require('node:worker_threads')

const rmqha = require('..')
const { brokerConfig } = require('./helpers')

const TOPIC = 'WorkerEnd'

async function inWorker({ mode, dir }) {
  const broker = await rmqha.startMaster(brokerConfig(dir, 'ASYNC_MASTER', { flushDiskType: 'SYNC_FLUSH' }))
  const put = (i) => broker.putMessage(TOPIC, `m${i}`).then(() => {}, () => {})
  if (mode === 'exit') {
    for (let i = 0; i < 200; i++) put(i)
    process.exit(0)
  }
  // 'terminate': keep puts in flight until the main thread ends this worker.
  let i = 0
  const more = () => {
    for (let k = 0; k < 20; k++) put(i++)
    setImmediate(more)
  }
  more()
  parentPort.postMessage('putting')
}

async function main() {
  const [mode, dir] = process.argv.slice(2)
  const worker = new Worker(__filename, { workerData: { mode, dir } })
  const exited = new Promise((resolve) => worker.once('exit', resolve))
  worker.on('error', (e) => {
    console.error('worker error', e)
    process.exitCode = 1
  })
  if (mode === 'terminate') {
    await new Promise((resolve) => worker.once('message', resolve))
    await worker.terminate()
  }
  const workerExit = await exited
  const broker = await rmqha.startMaster(brokerConfig(dir, 'ASYNC_MASTER'))
  const stored = broker.queueMaxOffset(TOPIC, 0)
  await broker.close()
  console.log(JSON.stringify({ workerExit, stored }))
}

if (isMainThread) {
  main().catch((e) => {
    console.error(e)
    process.exitCode = 1
  })
} else {
  inWorker(workerData).catch((e) => {
    console.error(e)
    process.exit(2)
  })
}
