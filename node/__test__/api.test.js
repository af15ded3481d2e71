'use strict'
// One master in this process: putting, reading, offsets, consumer offsets, configs from
// files, error codes, and use after close.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')

const rmqha = require('..')
const { cleanup, tmpStore, brokerConfig, waitFor } = require('./helpers')

test('put, read back by queue, key and id; offsets are numbers', async (t) => {
  const dir = tmpStore(t, 'api')
  const b = await rmqha.startMaster(brokerConfig(dir, 'ASYNC_MASTER'))
  cleanup(t, () => b.close())
  assert.equal(b.role(), 'ASYNC_MASTER')
  assert.ok(b.listenPort() > 0 && b.haPort() > 0)
  assert.equal(b.maxOffset(), 0)

  const r1 = await b.putMessage('Orders', Buffer.from([0, 1, 2, 255]), {
    queueId: 1,
    tags: 'tagA',
    keys: ['order-1', 'customer-9'],
    // `tags` and `keys` win over the same keys among the properties (as in Python).
    properties: { region: 'eu', TAGS: 'fromProperties' },
  })
  assert.equal(r1.status, 'PUT_OK')
  assert.equal(r1.phyOffset, 0)
  assert.equal(r1.queueId, 1)
  assert.equal(r1.queueOffset, 0)
  assert.match(r1.msgId, /^[0-9A-F]{32}$/)
  // No keys is no KEYS property (as in C and Python).
  const r2 = b.putMessageSync('Orders', 'second', { queueId: 1, keys: [] })
  assert.equal(r2.status, 'PUT_OK')
  assert.equal(r2.phyOffset, r1.size)
  assert.equal(r2.queueOffset, 1)
  assert.equal(b.maxOffset(), r1.size + r2.size)
  for (const v of [b.maxOffset(), b.minOffset(), b.flushedOffset(), b.slaveAckOffset()]) {
    assert.equal(typeof v, 'number')
  }

  // The ConsumeQueue is built by the dispatcher thread, a moment after the put.
  await waitFor('dispatch', () => b.queueMaxOffset('Orders', 1) === 2)
  assert.equal(b.queueMinOffset('Orders', 1), 0)
  const got = await b.getMessages('Orders', 1, 0, 32)
  assert.equal(got.status, 'FOUND')
  assert.equal(got.nextBeginOffset, 2)
  assert.equal(got.maxOffset, 2)
  assert.deepEqual(
    got.messages.map((m) => m.body),
    [Buffer.from([0, 1, 2, 255]), Buffer.from('second')],
  )
  const [m1] = got.messages
  assert.equal(m1.topic, 'Orders')
  assert.equal(m1.tags, 'tagA')
  assert.deepEqual(m1.keys, ['order-1', 'customer-9'])
  assert.equal(m1.properties.region, 'eu')
  assert.equal(m1.properties.TAGS, 'tagA')
  assert.deepEqual(got.messages[1].keys, [])
  assert.equal('KEYS' in got.messages[1].properties, false)
  assert.equal(m1.msgId, r1.msgId)
  assert.equal(m1.phyOffset, 0)
  assert.equal(m1.storeHost, `127.0.0.1:${b.listenPort()}`)

  const none = await b.getMessages('Orders', 3, 0, 32)
  assert.notEqual(none.status, 'FOUND')
  assert.deepEqual(none.messages, [])

  await waitFor('index', async () => (await b.queryByKey('Orders', 'customer-9', 10)).length === 1)
  assert.deepEqual(await b.queryByKey('Orders', 'nobody', 10), [])
  // Within store times (ms, both ends included).
  const [hit] = await b.queryByKey('Orders', 'customer-9', 10)
  assert.equal((await b.queryByKey('Orders', 'customer-9', 10, hit.storeTimestamp, hit.storeTimestamp)).length, 1)
  assert.deepEqual(await b.queryByKey('Orders', 'customer-9', 10, 0, hit.storeTimestamp - 1), [])
  assert.deepEqual(await b.queryByKey('Orders', 'customer-9', 10, hit.storeTimestamp + 1), [])
  assert.throws(() => b.queryByKey('Orders', 'customer-9', 10, 5, 4), { code: 'INVALID_ARGUMENT', message: /after end/ })
  // By store time: lower is the first message stored at or after it, upper the last at or
  // before it.
  const times = got.messages.map((m) => m.storeTimestamp)
  for (const ts of [times[0] - 1, ...times, times[1] + 1]) {
    const lower = times.findIndex((x) => x >= ts)
    const upper = times.findLastIndex((x) => x <= ts)
    assert.equal(await b.queueOffsetByTime('Orders', 1, ts), lower === -1 ? 2 : lower, `lower of ${ts}`)
    assert.equal(await b.queueOffsetByTime('Orders', 1, ts, 'upper'), upper === -1 ? 0 : upper, `upper of ${ts}`)
  }
  assert.equal(await b.queueOffsetByTime('Orders', 3, times[0], 'lower'), 0)
  assert.throws(() => b.queueOffsetByTime('Orders', 1, 0, 'sideways'), { code: 'INVALID_ARGUMENT', message: /sideways/ })
  assert.throws(() => b.queueOffsetByTime('Orders', 1, 0.5), { code: 'INVALID_ARGUMENT', message: /timestampMs/ })
  const byId = await b.messageById(r2.msgId)
  assert.equal(byId.body.toString(), 'second')
  assert.equal(await b.messageById('00000000000000000000000000FFFFFF'), null)

  const off = b.offsets()
  assert.equal(off.role, 'ASYNC_MASTER')
  assert.equal(off.maxOffset, b.maxOffset())
  assert.equal(off.listenPort, b.listenPort())
  assert.equal(off.haPort, b.haPort())
  assert.deepEqual(off.slaves, [])
  assert.equal(off.slaveAckOffset, -1)
})

test('getMessages keeps what a tag or SQL92 expression passes', async (t) => {
  const dir = tmpStore(t, 'selected')
  const b = await rmqha.startMaster(brokerConfig(dir, 'ASYNC_MASTER'))
  cleanup(t, () => b.close())
  const colors = ['red', 'blue', 'green']
  for (let i = 0; i < 30; i++) {
    const r = b.putMessageSync('Sel', `m${i}`, { tags: colors[i % 3], properties: { price: String(i) } })
    assert.equal(r.status, 'PUT_OK')
  }
  await waitFor('dispatch', () => b.queueMaxOffset('Sel', 0) === 30)
  const offsets = (got) => {
    for (const m of got.messages) assert.equal(m.body.toString(), `m${m.queueOffset}`)
    return got.messages.map((m) => m.queueOffset)
  }
  // Skipped messages do not count toward maxMsgs: four reds, not the reds among four.
  let got = await b.getMessages('Sel', 0, 0, 4, { tags: 'red' })
  assert.equal(got.status, 'FOUND')
  assert.deepEqual(offsets(got), [0, 3, 6, 9])
  assert.equal(got.nextBeginOffset, 10)
  got = await b.getMessages('Sel', 0, 0, 32, { tags: 'red || green' })
  assert.deepEqual(offsets(got), [...Array(30).keys()].filter((i) => i % 3 !== 1))
  got = await b.getMessages('Sel', 0, 0, 32, { sql: "TAGS = 'blue' AND price BETWEEN 10 AND 20" })
  assert.deepEqual(offsets(got), [10, 13, 16, 19])
  assert.deepEqual(offsets(await b.getMessages('Sel', 0, 0, 32, {})), [...Array(30).keys()])
  // Nothing passes: NO_MATCHED_MESSAGE, and nextBeginOffset past what was scanned.
  got = await b.getMessages('Sel', 0, 0, 32, { sql: 'price > 100' })
  assert.equal(got.status, 'NO_MATCHED_MESSAGE')
  assert.deepEqual(got.messages, [])
  assert.equal(got.nextBeginOffset, 30)
  assert.throws(() => b.getMessages('Sel', 0, 0, 32, { tags: 'red', sql: 'price > 1' }), {
    code: 'INVALID_ARGUMENT',
    message: /not both/,
  })
  assert.throws(() => b.getMessages('Sel', 0, 0, 32, { sql: 'price >' }), {
    code: 'INVALID_ARGUMENT',
    message: /column 8/,
  })
})

test('consumer offsets are committed and survive a restart', async (t) => {
  const dir = tmpStore(t, 'consumer')
  let b = await rmqha.startMaster(brokerConfig(dir, 'ASYNC_MASTER'))
  assert.equal(b.consumerOffset('g1', 'T', 0), -1)
  // An offset names a position in the queue: 42 needs 42 messages there.
  for (let i = 0; i < 42; i++) await b.putMessage('T', `m${i}`)
  await waitFor('dispatch', () => b.queueMaxOffset('T', 0) === 42)
  assert.throws(() => b.commitConsumerOffset('g1', 'T', 0, 43), { code: 'INVALID_ARGUMENT', message: /past the end/ })
  b.commitConsumerOffset('g1', 'T', 0, 42)
  assert.equal(b.consumerOffset('g1', 'T', 0), 42)
  assert.throws(() => b.commitConsumerOffset('g1', 'T', 0, -5), { code: 'INVALID_ARGUMENT' })
  await b.putMessage('T', 'kept')
  const end = b.maxOffset()
  await b.close()

  b = await rmqha.startMaster(brokerConfig(dir, 'ASYNC_MASTER'))
  cleanup(t, () => b.close())
  assert.equal(b.consumerOffset('g1', 'T', 0), 42)
  assert.equal(b.maxOffset(), end)
})

test('a CommitLog over two directories: files take turns, and every message comes back', async (t) => {
  const dir = tmpStore(t, 'dirs')
  const [d1, d2] = [path.join(dir, 'disk1', 'commitlog'), path.join(dir, 'disk2', 'commitlog')]
  // storePathCommitLog with ';' (RocketMQ 4.9.2): new files go round the sorted directories.
  const cfg = brokerConfig(path.join(dir, 'store'), 'ASYNC_MASTER', { storePathCommitLog: `${d2};${d1}` })
  let b = await rmqha.startMaster(cfg)
  const acked = []
  for (let i = 0; i < 400; i++) acked.push(await b.putMessage('Dirs', `m${i}-`.padEnd(500, 'x')))
  assert.ok(acked.every((r) => r.status === 'PUT_OK'))
  await b.close()
  const last = Math.floor(acked[acked.length - 1].phyOffset / 65536)
  assert.ok(last >= 2, `only ${last + 1} files`)
  for (let n = 0; n <= last; n++) {
    const name = String(n * 65536).padStart(20, '0')
    const [home, other] = n % 2 === 0 ? [d1, d2] : [d2, d1]
    assert.ok(fs.existsSync(path.join(home, name)) && !fs.existsSync(path.join(other, name)), name)
  }
  b = await rmqha.startMaster(cfg)
  cleanup(t, () => b.close())
  const end = acked[acked.length - 1]
  assert.equal(b.maxOffset(), end.phyOffset + end.size)
  for (const i of [0, 199, 399]) {
    const m = await b.messageById(acked[i].msgId)
    assert.equal(m.body.toString(), `m${i}-`.padEnd(500, 'x'))
  }
})

test('errors carry a code', async (t) => {
  const dir = tmpStore(t, 'errors')
  await assert.rejects(rmqha.startMaster(brokerConfig(dir, 'SLAVE', { haMasterAddress: '127.0.0.1:1' })), {
    code: 'WRONG_ROLE',
  })
  await assert.rejects(rmqha.startSlave(brokerConfig(dir, 'SYNC_MASTER')), { code: 'WRONG_ROLE' })
  await assert.rejects(rmqha.startMaster(brokerConfig(dir, 'ASYNC_MASTER', { listenPort: 'eighty' })), (e) => {
    assert.equal(e.code, 'CONFIG')
    assert.match(e.message, /listenPort/)
    return true
  })
  await assert.rejects(rmqha.startMaster(brokerConfig(dir, 'ASYNC_MASTER', { brokerRole: 'BOSS' })), {
    code: 'CONFIG',
  })
  // A store that cannot be made (its root under a regular file) is an I/O error naming it.
  fs.writeFileSync(path.join(dir, 'a-file'), 'not a directory')
  const under = path.join(dir, 'a-file', 'store')
  await assert.rejects(rmqha.startMaster(brokerConfig(under, 'ASYNC_MASTER')), (e) => {
    assert.equal(e.code, 'IO')
    assert.ok(e.message.includes(under), e.message)
    return true
  })
  // A config that is not an object is refused; napi read a number as no keys at all, and the
  // broker started on RocketMQ's default store in the home directory.
  for (const config of [5, 'storePathRootDir=/tmp/x', null, undefined, [dir]]) {
    assert.throws(() => rmqha.startMaster(config), { code: 'INVALID_ARGUMENT' }, `config ${config}`)
    assert.throws(() => rmqha.startSlave(config), { code: 'INVALID_ARGUMENT' }, `config ${config}`)
  }
  // Arguments of the wrong JavaScript type are napi-rs's errors, thrown at the call.
  const typed = await rmqha.startMaster(brokerConfig(path.join(dir, 'typed'), 'ASYNC_MASTER'))
  cleanup(t, () => typed.close())
  assert.throws(() => typed.putMessage(123, 'x'), { code: 'StringExpected' })
  assert.throws(() => typed.putMessage('T', { not: 'a body' }), { code: 'InvalidArg' })
  assert.throws(() => typed.getMessages('T', '0', 0, 1), { code: 'NumberExpected' })

  const b = await rmqha.startMaster(brokerConfig(dir, 'ASYNC_MASTER'))
  cleanup(t, () => b.close())
  await assert.rejects(b.putMessage('', 'no topic'), { code: 'PUT_FAILED', putStatus: 'MESSAGE_ILLEGAL' })
  assert.throws(() => b.putMessageSync('', 'no topic'), { code: 'PUT_FAILED', putStatus: 'MESSAGE_ILLEGAL' })
  assert.throws(() => b.setMasterAddress('127.0.0.1:1'), { code: 'WRONG_ROLE' })
  // Numbers that are not integers in range are refused, not wrapped, truncated or zeroed.
  for (const queueId of [2 ** 32 + 1, 2 ** 31, -1, 1.5, NaN]) {
    await assert.rejects(b.putMessage('T', 'x', { queueId }), { code: 'INVALID_ARGUMENT' }, `queueId ${queueId}`)
  }
  await assert.rejects(b.putMessage('T', 'x', { flag: 2 ** 40 + 3 }), { code: 'INVALID_ARGUMENT' })
  // KEYS is stored space-separated: a key with a space (or an empty one) could never be found.
  await assert.rejects(b.putMessage('T', 'x', { keys: ['order 1'] }), { code: 'INVALID_ARGUMENT', message: /space/ })
  await assert.rejects(b.putMessage('T', 'x', { keys: ['a', ''] }), { code: 'INVALID_ARGUMENT', message: /empty/ })
  assert.deepEqual(await b.queryByKey('T', 'k', 0), [], 'max 0 finds nothing, as in C and Python')
  assert.throws(() => b.getMessages('T', 0, 0, 0), { code: 'INVALID_ARGUMENT' })
  assert.throws(() => b.getMessages('T', 2 ** 32, 0, 1), { code: 'INVALID_ARGUMENT' })
  assert.throws(() => b.getMessages('T', 0, NaN, 1), { code: 'INVALID_ARGUMENT' })
  // A commit for a queue that holds nothing and that no topic config names is refused.
  assert.throws(() => b.commitConsumerOffset('g', 'T', 0, 0), { code: 'INVALID_ARGUMENT', message: /does not exist/ })
  await b.putMessage('T', 'one')
  const one = b.maxOffset()
  await waitFor('dispatch', () => b.queueMaxOffset('T', 0) === 1)
  b.commitConsumerOffset('g', 'T', 0, 1)
  for (const offset of [NaN, Infinity, 7.9, -1]) {
    assert.throws(() => b.commitConsumerOffset('g', 'T', 0, offset), { code: 'INVALID_ARGUMENT' }, `offset ${offset}`)
  }
  assert.equal(b.consumerOffset('g', 'T', 0), 1, 'a refused commit changed nothing')
  // Nothing was stored by the failures.
  assert.equal(b.maxOffset(), one)
})

test('setMasterAddress: a slave follows its master to new ports after a restart', async (t) => {
  const cfg = brokerConfig(tmpStore(t, 'moving-master'), 'SYNC_MASTER', { slaveTimeout: 10000 })
  let master = await rmqha.startMaster(cfg)
  cleanup(t, () => master.close())
  const slave = await rmqha.startSlave(
    brokerConfig(tmpStore(t, 'following-slave'), 'SLAVE', { haMasterAddress: `127.0.0.1:${master.haPort()}` }),
  )
  cleanup(t, () => slave.close())
  await waitFor('the slave to connect', () => master.offsets().slaves.some((s) => s.transferring))
  const first = await master.putMessage('Moves', 'before')
  assert.equal(first.status, 'PUT_OK')
  assert.throws(() => slave.setMasterAddress('no-port'), (e) => {
    assert.equal(e.code, 'INVALID_ARGUMENT')
    assert.match(e.message, /no-port/)
    return true
  })

  await master.close()
  master = await rmqha.startMaster(cfg)
  const address = `127.0.0.1:${master.haPort()}`
  slave.setMasterAddress(address)
  assert.equal(slave.offsets().masterAddress, address)
  await waitFor('the slave to reconnect', () => master.offsets().slaves.some((s) => s.transferring))
  // SYNC_MASTER: PUT_OK means the slave holds the record when the put returns.
  const second = await master.putMessage('Moves', 'after')
  assert.equal(second.status, 'PUT_OK')
  assert.equal(second.phyOffset, first.phyOffset + first.size)
  assert.equal(slave.maxOffset(), second.phyOffset + second.size)
  assert.equal(slave.offsets().connected, true)
})

test('use after close throws or rejects with CLOSED; close is idempotent', async (t) => {
  const dir = tmpStore(t, 'closed')
  const b = await rmqha.startMaster(brokerConfig(dir, 'ASYNC_MASTER'))
  assert.equal(b.closed, false)
  await b.close()
  assert.equal(b.closed, true)
  await b.close()
  const closed = { code: 'CLOSED' }
  await assert.rejects(b.putMessage('T', 'late'), closed)
  assert.throws(() => b.putMessageSync('T', 'late'), closed)
  assert.throws(() => b.getMessages('T', 0, 0, 1), closed)
  assert.throws(() => b.queryByKey('T', 'k', 1), closed)
  assert.throws(() => b.messageById('00'), closed)
  for (const f of ['role', 'maxOffset', 'minOffset', 'flushedOffset', 'slaveAckOffset', 'listenPort', 'haPort', 'offsets']) {
    assert.throws(() => b[f](), closed, f)
  }
  assert.throws(() => b.queueMaxOffset('T', 0), closed)
  assert.throws(() => b.queueOffsetByTime('T', 0, 0), closed)
  assert.throws(() => b.queueMinOffset('T', 0), closed)
  assert.throws(() => b.consumerOffset('g', 'T', 0), closed)
  assert.throws(() => b.commitConsumerOffset('g', 'T', 0, 1), closed)

  // The store was released: it opens again.
  const again = await rmqha.startMaster(brokerConfig(dir, 'ASYNC_MASTER'))
  await again.close()
})

test('an unclean stop rejects close() with STORE, and the broker is stopped all the same', async (t) => {
  const dir = tmpStore(t, 'unclean')
  const b = await rmqha.startMaster(brokerConfig(dir, 'ASYNC_MASTER'))
  // The delay offsets' temporary file cannot be made: a directory holds its name.
  const blocker = path.join(dir, 'config', 'delayOffset.json.tmp')
  fs.mkdirSync(blocker, { recursive: true })
  // The call that stops the broker rejects; one racing it waits and resolves, as do later ones.
  const first = b.close()
  const racing = b.close()
  await assert.rejects(first, { code: 'STORE', message: /stopped uncleanly: config tables not persisted/ })
  await racing
  assert.equal(b.closed, true)
  await b.close()
  fs.rmdirSync(blocker)
  const again = await rmqha.startMaster(brokerConfig(dir, 'ASYNC_MASTER'))
  await again.close()
})

test('a close racing another resolves once the store is released', async (t) => {
  // A second close() resolved at once while the first was still shutting down, so a broker
  // started on the same store right after it failed as locked.
  const dir = tmpStore(t, 'racing-close')
  for (let round = 0; round < 3; round++) {
    const b = await rmqha.startMaster(brokerConfig(dir, 'ASYNC_MASTER'))
    const puts = []
    for (let i = 0; i < 2000; i++) puts.push(b.putMessage('Close', `m${i}`))
    await Promise.all(puts)
    const first = b.close()
    await b.close()
    const again = await rmqha.startMaster(brokerConfig(dir, 'ASYNC_MASTER'))
    await again.close()
    await first
  }
})

test('loadProperties reads a broker.properties file', async (t) => {
  const dir = tmpStore(t, 'props')
  const file = path.join(dir, 'broker.properties')
  fs.writeFileSync(
    file,
    [
      '# a RocketMQ broker config',
      'brokerName = broker-b',
      'brokerRole=SYNC_MASTER',
      `storePathRootDir=${path.join(dir, 'store')}`,
      'mapedFileSizeCommitLog=65536',
      'bindAddress=127.0.0.1',
      'listenPort=0',
      'haListenPort=0',
      'namesrvAddrr=127.0.0.1:9876',
      '',
    ].join('\n'),
  )
  const warnings = []
  const onWarning = (w) => warnings.push(w)
  process.on('warning', onWarning)
  cleanup(t, () => process.off('warning', onWarning))

  const cfg = await rmqha.loadProperties(file)
  assert.equal(cfg.brokerName, 'broker-b')
  assert.equal(cfg.brokerRole, 'SYNC_MASTER')
  assert.equal(cfg.mappedFileSizeCommitLog, '65536', 'the old spelling maps to the current key')
  assert.equal(cfg.namesrvAddrr, undefined)
  await waitFor('the unknown key warning', () => warnings.some((w) => /namesrvAddrr/.test(w.message)))

  const b = await rmqha.startMaster(cfg)
  cleanup(t, () => b.close())
  assert.equal(b.role(), 'SYNC_MASTER')
  // No slave: stored, but SLAVE_NOT_AVAILABLE (a result, not an error).
  assert.equal((await b.putMessage('T', 'x')).status, 'SLAVE_NOT_AVAILABLE')

  fs.writeFileSync(file, 'brokerRole=CAPTAIN\n')
  await assert.rejects(rmqha.loadProperties(file), (e) => {
    assert.equal(e.code, 'CONFIG')
    assert.match(e.message, /brokerRole/)
    return true
  })
  await assert.rejects(rmqha.loadProperties(path.join(dir, 'missing.properties')), { code: 'CONFIG' })
})

test('metrics() counts the puts and their answers as Prometheus text', async (t) => {
  const dir = tmpStore(t, 'metrics')
  const b = await rmqha.startMaster(brokerConfig(dir, 'SYNC_MASTER'))
  cleanup(t, () => b.close())
  for (let i = 0; i < 2; i++) assert.equal((await b.putMessage('T', 'x')).status, 'SLAVE_NOT_AVAILABLE')
  await assert.rejects(b.putMessage('bad topic', 'x'))
  const lines = b.metrics().split('\n')
  assert.ok(lines.includes('rmqha_puts_waited_total{status="SLAVE_NOT_AVAILABLE"} 2'), lines.join('\n'))
  assert.ok(lines.includes('rmqha_puts_refused_total{status="MESSAGE_ILLEGAL"} 1'))
  assert.ok(lines.includes('rmqha_puts_stored_total 2'))
  assert.ok(lines.includes(`rmqha_commitlog_max_offset_bytes ${b.maxOffset()}`))
})

test('a store is removed after its broker is closed, leaving nothing behind', async (t) => {
  let dir
  await t.test('a broker that persists its config as it closes', async (t) => {
    dir = tmpStore(t, 'cleanup')
    const b = await rmqha.startMaster(brokerConfig(dir, 'ASYNC_MASTER'))
    cleanup(t, () => b.close())
    assert.equal((await b.putMessage('Orders', 'kept until the test ends')).status, 'PUT_OK')
  })
  assert.equal(fs.existsSync(dir), false, `${dir} was left behind`)
})

test('version() is the workspace version, and package.json carries the same', () => {
  const cargo = fs.readFileSync(path.join(__dirname, '..', '..', 'Cargo.toml'), 'utf8')
  const workspace = /\[workspace\.package\][^[]*?\nversion\s*=\s*"([^"]+)"/.exec(cargo)[1]
  assert.equal(rmqha.version(), workspace)
  assert.equal(require('../package.json').version, workspace)
})

test('haAuthSecret is taken only as a string', async (t) => {
  const dir = tmpStore(t, 'secret')
  // Refused before anything starts, as a config that is no object is.
  assert.throws(() => rmqha.startMaster(brokerConfig(dir, 'ASYNC_MASTER', { haAuthSecret: 12345678901234567890 })), {
    code: 'INVALID_ARGUMENT',
    message: /haAuthSecret must be a string/,
  })
  const b = await rmqha.startMaster(brokerConfig(dir, 'ASYNC_MASTER', { haAuthSecret: '12345678901234567890' }))
  await b.close()
})
