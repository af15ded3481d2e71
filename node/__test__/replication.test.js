'use strict'
// A SYNC_MASTER in this process and a SLAVE in another Node process, replicating over
// 127.0.0.1: PUT_OK means the slave holds the bytes; the slave serves reads, refuses puts, and
// its process exits by itself after close().

const test = require('node:test')
const assert = require('node:assert/strict')

const rmqha = require('..')
const { cleanup, tmpStore, brokerConfig, waitFor, exitOf, startBrokerProcess } = require('./helpers')

test('a slave in another process replicates a SYNC_MASTER', async (t) => {
  const master = await rmqha.startMaster(brokerConfig(tmpStore(t, 'master'), 'SYNC_MASTER'))
  cleanup(t, () => master.close())
  const slave = await startBrokerProcess(
    t,
    'SLAVE',
    brokerConfig(tmpStore(t, 'slave'), 'SLAVE', { haMasterAddress: `127.0.0.1:${master.haPort()}` }),
  )
  assert.ok(slave.listenPort > 0)
  assert.equal(slave.haPort, 0)
  await waitFor('the slave to connect', () => master.offsets().slaves.some((s) => s.transferring))

  const bodies = Array.from({ length: 200 }, (_, i) => `replicated-${i}-`.padEnd(100 + (i % 50), 'x'))
  const results = []
  for (const [i, body] of bodies.entries()) {
    const r = await master.putMessage('Rep', body, { queueId: i % 2, keys: [`k${i}`] })
    assert.equal(r.status, 'PUT_OK', `put ${i}`)
    results.push(r)
  }
  // SYNC_MASTER: PUT_OK came after the slave's ack, so the slave already has every byte.
  const end = master.maxOffset()
  assert.equal(master.slaveAckOffset(), end)
  const so = await slave.request('offsets')
  assert.ok(so.maxOffset >= end, `slave at ${so.maxOffset}, master at ${end}`)
  assert.equal(so.role, 'SLAVE')
  assert.equal(so.connected, true)
  assert.equal(so.masterAddress, `127.0.0.1:${master.haPort()}`)
  // The slave records its ack just after sending it: it may lag the master's view briefly.
  await waitFor('the slave to record its ack', async () => (await slave.request('offsets')).slaveAckOffset === end)
  const mo = master.offsets()
  assert.equal(mo.slaves.length, 1)
  assert.equal(mo.slaves[0].ackOffset, end)
  const { lastReportMs, connectedMs } = mo.slaves[0]
  assert.ok(lastReportMs >= 0 && lastReportMs <= connectedMs, `last report ${lastReportMs} ms ago, connected ${connectedMs} ms`)

  // The slave serves the messages from its own store, byte for byte.
  await waitFor('the slave to dispatch', async () => (await slave.request('queueMaxOffset', { topic: 'Rep', queueId: 1 })) === 100)
  const got = await slave.request('getMessages', { topic: 'Rep', queueId: 1, offset: 0, max: 32 })
  assert.equal(got.status, 'FOUND')
  assert.equal(got.messages.length, 32)
  for (const [j, m] of got.messages.entries()) {
    const i = 2 * j + 1
    assert.equal(Buffer.from(m.body, 'base64').toString(), bodies[i])
    assert.equal(m.msgId, results[i].msgId)
    assert.equal(m.phyOffset, results[i].phyOffset)
  }

  // A slave takes no puts; consumer offsets are accepted on both roles.
  await assert.rejects(slave.request('put', { topic: 'Rep', body: 'to a slave' }), {
    code: 'PUT_FAILED',
    putStatus: 'SERVICE_NOT_AVAILABLE',
  })
  assert.equal(await slave.request('commitConsumerOffset', { group: 'g', topic: 'Rep', queueId: 0, offset: 7 }), 7)

  // close() joins the broker's threads and settles everything: the child exits on its own.
  await slave.request('close')
  assert.equal(await exitOf(slave.child, 20000), 0)
  await waitFor('the master to see the slave go', () => master.offsets().slaves.length === 0)
  assert.equal((await master.putMessage('Rep', 'alone')).status, 'SLAVE_NOT_AVAILABLE')
})
