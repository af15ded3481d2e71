'use strict'
// 1000 putMessage promises waiting for a slave's ack must hold neither the event loop nor
// libuv's thread pool: the slave process is paused (SIGSTOP) while they wait, and timers and
// fs calls still run; once it resumes every put resolves PUT_OK.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const { performance } = require('node:perf_hooks')

const rmqha = require('..')
const { cleanup, tmpStore, brokerConfig, waitFor, freeze, startBrokerProcess } = require('./helpers')

test('1000 concurrent puts on a SYNC_MASTER resolve PUT_OK; waits hold no libuv thread', async (t) => {
  const master = await rmqha.startMaster(
    brokerConfig(tmpStore(t, 'load-master'), 'SYNC_MASTER', { slaveTimeout: 20000 }),
  )
  cleanup(t, () => master.close())
  const slave = await startBrokerProcess(
    t,
    'SLAVE',
    brokerConfig(tmpStore(t, 'load-slave'), 'SLAVE', { haMasterAddress: `127.0.0.1:${master.haPort()}` }),
  )
  await waitFor('the slave to connect', () => master.offsets().slaves.some((s) => s.transferring))
  assert.equal((await master.putMessage('Load', 'warm-up')).status, 'PUT_OK')

  let ticks = 0
  const timer = setInterval(() => ticks++, 5)
  cleanup(t, () => clearInterval(timer))

  // No acks while the slave is stopped: every put below waits for replication.
  await freeze(slave.child)
  let settled = 0
  const puts = Array.from({ length: 1000 }, (_, i) =>
    master.putMessage('Load', `load-${i}`.padEnd(128, '.'), { queueId: i % 4 }).finally(() => settled++),
  )
  const ticksAtStart = ticks

  // More fs calls than libuv has pool threads (4 by default): all must finish promptly.
  const t0 = performance.now()
  const files = await Promise.all(Array.from({ length: 16 }, () => fs.promises.readFile(__filename, 'utf8')))
  const fsMs = performance.now() - t0
  assert.ok(files.every((f) => f.includes('SIGSTOP')))
  await waitFor('the timer to tick', () => ticks >= ticksAtStart + 20)
  assert.equal(settled, 0, 'puts settled while the slave was stopped')
  assert.ok(fsMs < 2000, `fs took ${fsMs.toFixed(0)} ms with 1000 puts pending`)

  slave.child.kill('SIGCONT')
  const results = await Promise.all(puts)
  clearInterval(timer)
  const statuses = {}
  for (const r of results) statuses[r.status] = (statuses[r.status] ?? 0) + 1
  assert.deepEqual(statuses, { PUT_OK: 1000 })
  // Stored in call order.
  for (let i = 1; i < results.length; i++) assert.ok(results[i].phyOffset > results[i - 1].phyOffset)
  assert.equal(master.slaveAckOffset(), master.maxOffset())
  assert.ok(ticks >= ticksAtStart + 20, `the timer ticked ${ticks - ticksAtStart} times`)

  await slave.request('close')
})
