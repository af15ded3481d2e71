'use strict'
// Put throughput through the Node binding, with the binding's own baseline from the same run.
//
//   cd node && npm run build && node bench/put.js [--messages N] [--body-size B] [--in-flight K]
//
// For each flushDiskType (ASYNC_FLUSH, SYNC_FLUSH) on an ASYNC_MASTER without slaves:
// - putMessageSync: one blocking call per message, no promise (the baseline: the cost of a
//   call into the addon, the append and, on SYNC_FLUSH, one group commit per message);
// - putMessage: promises, K in flight (each settled from rmqha's flush thread on SYNC_FLUSH).
// Stores live in a temporary directory, removed at the end.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const rmqha = require('..')

function arg(name, dflt) {
  const i = process.argv.indexOf(`--${name}`)
  if (i < 0) return dflt
  const v = Number(process.argv[i + 1])
  if (!Number.isInteger(v) || v < 1) throw new Error(`--${name} wants a positive integer`)
  return v
}

const MESSAGES = arg('messages', 200000)
const BODY = Buffer.alloc(arg('body-size', 1024), 'x')
const IN_FLIGHT = arg('in-flight', 1000)

function config(dir, flushDiskType) {
  return {
    storePathRootDir: dir,
    brokerRole: 'ASYNC_MASTER',
    flushDiskType,
    bindAddress: '127.0.0.1',
    listenPort: 0,
    haListenPort: 0,
  }
}

function report(label, n, t0, statuses) {
  const s = Number(process.hrtime.bigint() - t0) / 1e9
  const notOk = Object.entries(statuses).filter(([k]) => k !== 'PUT_OK')
  const rate = Math.round(n / s)
  console.log(
    `${label.padEnd(36)} ${String(rate).padStart(9)} msgs/s  ${(s * 1000).toFixed(0).padStart(6)} ms` +
      (notOk.length ? `  not OK: ${JSON.stringify(Object.fromEntries(notOk))}` : ''),
  )
  return rate
}

function count(statuses, status) {
  statuses[status] = (statuses[status] || 0) + 1
}

async function run(root, flushDiskType) {
  // SYNC_FLUSH puts one at a time wait for a disk flush each: fewer of them.
  const syncN = flushDiskType === 'SYNC_FLUSH' ? Math.min(MESSAGES, 5000) : MESSAGES
  const broker = await rmqha.startMaster(config(path.join(root, flushDiskType), flushDiskType))
  try {
    // Warm-up: the first file's pages and the queue.
    for (let i = 0; i < 1000; i++) broker.putMessageSync('Warm', BODY)

    let statuses = {}
    let t0 = process.hrtime.bigint()
    for (let i = 0; i < syncN; i++) count(statuses, broker.putMessageSync('Bench', BODY).status)
    const base = report(`${flushDiskType} putMessageSync`, syncN, t0, statuses)

    statuses = {}
    t0 = process.hrtime.bigint()
    for (let done = 0; done < MESSAGES; ) {
      const k = Math.min(IN_FLIGHT, MESSAGES - done)
      const batch = new Array(k)
      for (let i = 0; i < k; i++) batch[i] = broker.putMessage('Bench', BODY)
      for (const r of await Promise.all(batch)) count(statuses, r.status)
      done += k
    }
    const rate = report(`${flushDiskType} putMessage, ${IN_FLIGHT} in flight`, MESSAGES, t0, statuses)
    console.log(`${''.padEnd(36)} ${(rate / base).toFixed(2)}x putMessageSync`)
  } finally {
    await broker.close()
  }
}

async function main() {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'rmqha-node-bench-'))
  try {
    console.log(`node ${process.version}, ${MESSAGES} messages of ${BODY.length} B`)
    for (const type of ['ASYNC_FLUSH', 'SYNC_FLUSH']) await run(root, type)
  } finally {
    fs.rmSync(root, { recursive: true, force: true })
  }
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
