'use strict'
// A RocketMQ client we did not write against brokers of ours: `ali-ons`, a pure-JavaScript
// RocketMQ client (npm; Aliyun's ONS client with Apache RocketMQ support), produces to and
// consumes from masters and slaves in this process: sends, stored bytes, tag filters and
// committed offsets; a handler's retry through the group's retry topic; and a consumer that
// carries on from the slave once its master is gone. The client finds the brokers through its
// `nameSrv` option pointed at a broker's listen port (rmqha answers the name server's route
// requests itself), so nothing of Aliyun's is asked: its `httpclient` (used only to look up
// name servers over HTTP when `nameSrv` is not given) is a stub that fails the test if called.
// Each test takes 1-2 s and is cut off at 15 s, its waits at 10 s, so the file ends within a
// minute even when every test fails.

const test = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const zlib = require('node:zlib')

const rmqha = require('..')
const { cleanup, tmpStore, brokerConfig, waitFor } = require('./helpers')
const { Producer, Consumer, Message } = require('ali-ons')
// The producer that every ali-ons client makes for itself (to resend messages a handler
// failed), one per process and never closed by the clients: the test closes it.
const MQProducer = require('ali-ons/lib/producer/mq_producer')
const ConsumeFromWhere = require('ali-ons/lib/consumer/consume_from_where')

const TOPIC = 'AliOnsTopic'
const GROUP = 'CID_RMQHA_ALIONS'
// A tag and a key beyond ASCII: properties travel as UTF-8, tags codes are Java hash codes.
const TAGS = ['TagA', '标签B', 'TagC']
const N = 24
// ali-ons deflates bodies of 4 KiB and more and flags them compressed (sysFlag bit 0).
const BIG = 7
const COMPRESSED = 1
const keysOf = (i) => [`key-${i}`, `订单-${i % 5}`]
const bodyOf = (i) => Buffer.from(`ali-ons body ${i} `.padEnd(i === BIG ? 6000 : 40 + i, '*'))

/** ali-ons logs warnings and errors to the console; keep them for the failure message. */
function recordingLogger(lines) {
  const text = (a) => (a instanceof Error ? a.stack : String(a))
  const keep = (level) => (...args) => lines.push(`${level}: ${args.map(text).join(' ')}`)
  return { info() {}, debug() {}, warn: keep('warn'), error: keep('error') }
}

/** Resolves with `p`, or rejects after `ms` saying what did not finish. */
function within(what, ms, p) {
  let timer
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms)
  })
  return Promise.race([p, late]).finally(() => clearTimeout(timer))
}

/**
 * An ali-ons producer started against `master` (closed after the test, with the inner
 * producer ali-ons makes for itself), the options for more clients, the errors they emit, and
 * `createTopic`. Call `done()` at the end of a test that passed: otherwise what ali-ons logged
 * is printed.
 */
async function aliOns(t, master, extraOptions = {}) {
  const logs = []
  const errors = []
  let passed = false
  t.after(() => {
    if (!passed && logs.length > 0) t.diagnostic(`ali-ons logged:\n${logs.join('\n')}`)
  })
  const addr = `127.0.0.1:${master.listenPort()}`
  const clientOptions = {
    nameSrv: addr,
    httpclient: {
      request(url) {
        errors.push(new Error(`ali-ons asked ${url} over HTTP`))
        throw new Error('no HTTP lookups in this test')
      },
    },
    clientIP: '127.0.0.1',
    logger: recordingLogger(logs),
    // Short periods, so that the clients' timers are gone soon after close().
    pollNameServerInteval: 1000,
    heartbeatBrokerInterval: 1000,
    rebalanceInterval: 1000,
    persistConsumerOffsetInterval: 300,
    // A short long-poll, so that a consumer's close() does not wait for a parked pull.
    brokerSuspendMaxTimeMillis: 1000,
    consumerTimeoutMillisWhenSuspend: 5000,
    ...extraOptions,
  }
  const producer = new Producer({ ...clientOptions, producerGroup: 'PID_RMQHA_ALIONS' })
  producer.on('error', (e) => errors.push(e))
  // A second close() would unregister from the brokers again, through new connections.
  const closeProducer = once(() => within('closing the ali-ons producer', 5000, producer.close()))
  cleanup(t, closeProducer)
  cleanup(t, async () => {
    const inner = MQProducer.defaultProducer
    MQProducer.defaultProducer = null
    if (inner) await within("closing ali-ons' inner producer", 5000, inner.close())
  })
  await within('the producer to start', 10000, producer.ready())

  // ali-ons sends only to a topic the name server has a route for: unlike RocketMQ's Java
  // client, it does not fall back to TBW102's route when the lookup answers TOPIC_NOT_EXIST
  // (its updateTopicRouteInfoFromNameServer throws), so a first send never reaches the broker
  // to auto-create the topic. It is created the way ali-ons can, with UPDATE_AND_CREATE_TOPIC.
  const createTopic = (topic, queues) =>
    within(
      `creating topic ${topic}`,
      10000,
      producer._mqClient.createTopic(addr, 'TBW102', {
        topicName: topic,
        readQueueNums: queues,
        writeQueueNums: queues,
        perm: 6, // read + write
        topicFilterType: 'SINGLE_TAG',
        topicSysFlag: 0,
        order: false,
      }),
    )
  return { producer, closeProducer, errors, createTopic, clientOptions, done: () => (passed = true) }
}

/** `fn` the first time, nothing after. */
function once(fn) {
  let p = null
  return () => (p ??= fn())
}

/**
 * The errors ali-ons emitted, less the expected ones: a consumer looks up its group's retry
 * topic before its first heartbeat, which is what creates that topic (on a stock RocketMQ
 * broker too), so its first lookups answer TOPIC_NOT_EXIST (17).
 */
function unexpectedErrors(errors, group) {
  return errors.filter((e) => !(e.code === 17 && e.message.includes(`topic: %RETRY%${group}`)))
}

test('ali-ons produces to and consumes from a SYNC_MASTER with a slave', { timeout: 15000 }, async (t) => {
  const master = await rmqha.startMaster(
    brokerConfig(tmpStore(t, 'alions-m'), 'SYNC_MASTER', { brokerClusterName: 'DefaultCluster' }),
  )
  cleanup(t, () => master.close())
  const slave = await rmqha.startSlave(
    brokerConfig(tmpStore(t, 'alions-s'), 'SLAVE', {
      brokerClusterName: 'DefaultCluster',
      haMasterAddress: `127.0.0.1:${master.haPort()}`,
      masterAddress: `127.0.0.1:${master.listenPort()}`,
    }),
  )
  cleanup(t, () => slave.close())
  await waitFor('the slave to connect', () => master.offsets().slaves.some((s) => s.transferring))

  const { producer, errors, createTopic, clientOptions, done } = await aliOns(t, master)
  await createTopic(TOPIC, 4)

  // TAGS[i % 3] and two keys each.
  const sent = []
  for (let i = 0; i < N; i++) {
    const msg = new Message(TOPIC, TAGS[i % TAGS.length], bodyOf(i))
    msg.keys = keysOf(i)
    const r = await within(`send ${i}`, 10000, producer.send(msg))
    assert.equal(r.sendStatus, 'SEND_OK', `send ${i}: ${JSON.stringify(r)}`)
    assert.match(r.msgId, /^[0-9A-F]{32}$/, `send ${i}`)
    assert.equal(r.messageQueue.topic, TOPIC)
    assert.equal(r.messageQueue.brokerName, 'broker-a')
    const queueId = Number(r.messageQueue.queueId) // a string, as every header field
    sent.push({ i, tag: TAGS[i % TAGS.length], body: bodyOf(i), queueId, queueOffset: r.queueOffset, msgId: r.msgId })
  }
  // ali-ons spreads sends over the topic's write queues (4 by default), each from offset 0.
  const queueIds = [...new Set(sent.map((s) => s.queueId))].sort()
  assert.ok(queueIds.length > 1, `sent to queues ${queueIds}`)
  for (const q of queueIds) {
    assert.ok(Number.isInteger(q) && q >= 0 && q < 4, `queue ${q}`)
    assert.deepEqual(
      sent.filter((s) => s.queueId === q).map((s) => s.queueOffset),
      sent.filter((s) => s.queueId === q).map((_, k) => k),
      `queue offsets of queue ${q}`,
    )
  }
  assert.equal(new Set(sent.map((s) => s.msgId)).size, N)
  // SYNC_MASTER: SEND_OK came after the slave held the bytes.
  assert.equal(master.slaveAckOffset(), master.maxOffset())
  // The route ali-ons was given names the master as broker 0 and the slave (registered with
  // its master at start) as broker 1, as a RocketMQ name server would.
  const masterAddr = `127.0.0.1:${master.listenPort()}`
  const slaveAddr = `127.0.0.1:${slave.listenPort()}`
  await waitFor('the route to list the slave', async () => {
    const r = await producer._mqClient.getTopicRouteInfoFromNameServer(TOPIC, 3000)
    return JSON.stringify(r.brokerDatas.map((b) => b.brokerAddrs)) === JSON.stringify([{ 0: masterAddr, 1: slaveAddr }])
  })

  // The broker stored exactly those bodies, tags and keys, where the answers said, and so did
  // its slave.
  for (const [b, q] of [master, slave].flatMap((b) => queueIds.map((q) => [b, q]))) {
    const mine = sent.filter((s) => s.queueId === q)
    await waitFor(`queue ${q} dispatched`, () => b.queueMaxOffset(TOPIC, q) === mine.length)
    const got = await b.getMessages(TOPIC, q, 0, 64)
    assert.equal(got.status, 'FOUND')
    assert.equal(got.messages.length, mine.length)
    for (const [k, m] of got.messages.entries()) {
      const s = mine[k]
      assert.equal(m.sysFlag & COMPRESSED, s.i === BIG ? COMPRESSED : 0, `sysFlag of message ${s.i}`)
      assert.deepEqual(s.i === BIG ? zlib.inflateSync(m.body) : m.body, s.body, `body of message ${s.i}`)
      assert.equal(m.topic, TOPIC)
      assert.equal(m.tags, s.tag)
      assert.deepEqual(m.keys, keysOf(s.i))
      assert.equal(m.queueId, q)
      assert.equal(m.queueOffset, k)
      assert.equal(m.msgId, s.msgId)
    }
  }
  for (const s of sent) {
    await waitFor(`key-${s.i} indexed`, async () => (await master.queryByKey(TOPIC, `key-${s.i}`, 8)).length === 1)
    const [hit] = await master.queryByKey(TOPIC, `key-${s.i}`, 8)
    assert.equal(hit.msgId, s.msgId)
  }
  assert.deepEqual(
    (await master.queryByKey(TOPIC, '订单-3', 32)).map((m) => m.msgId).sort(),
    sent.filter((s) => s.i % 5 === 3).map((s) => s.msgId).sort(),
  )

  // A cluster-mode consumer with a tag filter gets the TagA and 标签B messages, once each.
  const received = []
  const consumer = new Consumer({
    ...clientOptions,
    consumerGroup: GROUP,
    // ali-ons' default, CONSUME_FROM_LAST_OFFSET, asks the broker for the group's offset
    // first: a new group on a queue that still starts at 0 in memory gets 0 (RocketMQ 4.9's
    // rule) and so reads the messages sent before it started.
    consumeFromWhere: ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
  })
  consumer.on('error', (e) => errors.push(e))
  // What the broker answered each pull with, before ali-ons' own tag check (which would hide
  // a TagC message the broker should have filtered out).
  const pulledTags = []
  const mqClient = consumer._mqClient
  const pullMessage = mqClient.pullMessage
  mqClient.pullMessage = async function (...args) {
    const r = await pullMessage.apply(this, args)
    if (args[1].topic === TOPIC) pulledTags.push(...r.msgFoundList.map((m) => m.tags))
    return r
  }
  cleanup(t, () => within('closing the ali-ons consumer', 5000, consumer.close()))
  consumer.subscribe(TOPIC, `${TAGS[0]} || ${TAGS[1]}`, async (msg) => {
    const { body, tags, keys, msgId, queueId, queueOffset } = msg
    received.push({ body, tags, keys, msgId, queueId, queueOffset })
  })
  await within('the consumer to start', 10000, consumer.ready())
  const wanted = sent.filter((s) => s.tag !== 'TagC')
  await waitFor(`${wanted.length} messages consumed`, () => received.length >= wanted.length, 10000)
  // Its offsets are committed to the broker up to the end of every queue, past the TagC
  // messages the broker filtered out.
  await waitFor(
    'the consumer offsets committed',
    () => queueIds.every((q) => master.consumerOffset(GROUP, TOPIC, q) === master.queueMaxOffset(TOPIC, q)),
    10000,
  )

  assert.deepEqual(pulledTags.filter((tag) => tag !== TAGS[0] && tag !== TAGS[1]), [])
  const key = (m) => `${m.queueId}/${m.queueOffset}`
  assert.deepEqual(received.map(key).sort(), wanted.map(key).sort())
  const byKey = new Map(wanted.map((s) => [key(s), s]))
  for (const m of received) {
    const s = byKey.get(key(m))
    assert.deepEqual(m.body, s.body)
    assert.equal(m.tags, s.tag)
    assert.notEqual(m.tags, 'TagC')
    assert.equal(m.keys, keysOf(s.i).join(' '))
    assert.equal(m.msgId, s.msgId)
  }

  // The group's retry topic, which the consumer's first lookups did not find (see
  // unexpectedErrors), is there now; nothing else went wrong.
  const retryTopic = `%RETRY%${GROUP}`
  const route = await within('the retry topic route', 5000, producer._mqClient.getTopicRouteInfoFromNameServer(retryTopic, 3000))
  assert.deepEqual(route.brokerDatas.map((b) => b.brokerName), ['broker-a'])
  assert.deepEqual(unexpectedErrors(errors, GROUP), [])
  done()
})

test('a message ali-ons is asked to retry comes back through the retry topic', { timeout: 15000 }, async (t) => {
  // ali-ons hands a failed message back with CONSUMER_SEND_MSG_BACK and delay level 0, which
  // the broker makes 3 + reconsumeTimes: one second here rather than RocketMQ's 10 s.
  const master = await rmqha.startMaster(
    brokerConfig(tmpStore(t, 'alions-r'), 'ASYNC_MASTER', { messageDelayLevel: '1s 1s 1s 1s 1s' }),
  )
  cleanup(t, () => master.close())
  const { producer, errors, createTopic, clientOptions, done } = await aliOns(t, master)
  const topic = 'AliOnsRetry'
  const group = 'CID_RMQHA_ALIONS_RETRY'
  await createTopic(topic, 1)
  const sent = []
  for (const body of ['first', 'retry-me', 'third']) {
    const r = await within(`send ${body}`, 10000, producer.send(new Message(topic, 'TagA', body)))
    assert.equal(r.sendStatus, 'SEND_OK')
    sent.push(r)
  }

  const got = []
  let retried = false
  const consumer = new Consumer({ ...clientOptions, consumerGroup: group })
  consumer.on('error', (e) => errors.push(e))
  cleanup(t, () => within('closing the ali-ons consumer', 5000, consumer.close()))
  consumer.subscribe(topic, '*', async (msg) => {
    const { topic, reconsumeTimes, originMessageId } = msg
    got.push({ body: msg.body.toString(), topic, reconsumeTimes, originMessageId })
    if (msg.body.toString() === 'retry-me' && !retried) {
      retried = true
      return Consumer.ACTION_RETRY
    }
  })
  await within('the consumer to start', 10000, consumer.ready())
  const retryTopic = `%RETRY%${group}`
  await waitFor('4 deliveries', () => got.length >= 4, 10000)
  await waitFor(
    'the consumer offsets committed',
    () => master.consumerOffset(group, topic, 0) === 3 && master.consumerOffset(group, retryTopic, 0) === 1,
    10000,
  )
  // The broker put the handed-back message in the group's retry topic, delayed, with
  // reconsumeTimes 1; ali-ons consumed it from there.
  assert.deepEqual(
    got.map((m) => [m.body, m.reconsumeTimes]),
    [
      ['first', 0],
      ['retry-me', 0],
      ['third', 0],
      ['retry-me', 1],
    ],
  )
  assert.equal(got[3].topic, topic) // ali-ons restores the original topic from RETRY_TOPIC
  // As a 4.9 broker sets it: the first copy's offset message id.
  const [original] = (await master.getMessages(topic, 0, 1, 1)).messages
  assert.equal(original.body.toString(), 'retry-me')
  assert.equal(got[3].originMessageId, original.msgId)
  const stored = await master.getMessages(retryTopic, 0, 0, 8)
  assert.equal(stored.messages.length, 1)
  const [m] = stored.messages
  assert.equal(m.body.toString(), 'retry-me')
  assert.equal(m.reconsumeTimes, 1)
  assert.equal(m.properties.RETRY_TOPIC, topic)
  assert.equal(m.properties.ORIGIN_MESSAGE_ID, original.msgId)
  assert.equal(m.properties.DELAY, undefined)
  // Delivered by the scheduler: its delayed record is in SCHEDULE_TOPIC_XXXX.
  assert.equal((await master.getMessages('SCHEDULE_TOPIC_XXXX', 2, 0, 8)).messages.length, 1)
  assert.deepEqual(unexpectedErrors(errors, group), [])
  done()
})

test('with its master stopped, an ali-ons consumer resumes from the slave at the committed offsets', { timeout: 15000 }, async (t) => {
  const master = await rmqha.startMaster(brokerConfig(tmpStore(t, 'alions-fm'), 'SYNC_MASTER'))
  const closeMaster = once(() => master.close())
  cleanup(t, closeMaster)
  const slaveDir = tmpStore(t, 'alions-fs')
  const slave = await rmqha.startSlave(
    brokerConfig(slaveDir, 'SLAVE', {
      haMasterAddress: `127.0.0.1:${master.haPort()}`,
      masterAddress: `127.0.0.1:${master.listenPort()}`,
      slaveSyncIntervalMs: 200, // consumer offsets and groups reach the slave soon
    }),
  )
  cleanup(t, () => slave.close())
  await waitFor('the slave to connect', () => master.offsets().slaves.some((s) => s.transferring))
  const { producer, closeProducer, errors, createTopic, clientOptions, done } = await aliOns(t, master)
  const topic = 'AliOnsFailover'
  const group = 'CID_RMQHA_ALIONS_FAILOVER'
  const queues = [0, 1]
  await createTopic(topic, queues.length)
  const send = async (body) => {
    const r = await within(`send ${body}`, 10000, producer.send(new Message(topic, 'TagA', body)))
    assert.equal(r.sendStatus, 'SEND_OK')
  }
  const got = []
  const consume = (nameSrv) => {
    const consumer = new Consumer({ ...clientOptions, nameSrv, consumerGroup: group })
    consumer.on('error', (e) => errors.push(e))
    const close = once(() => within('closing an ali-ons consumer', 5000, consumer.close()))
    cleanup(t, close)
    consumer.subscribe(topic, '*', async (msg) => {
      got.push(msg.body.toString())
    })
    return { ready: () => within('a consumer to start', 10000, consumer.ready()), close }
  }

  // Two messages a queue, consumed through the master, offsets committed there.
  for (let i = 0; i < 4; i++) await send(`before-${i}`)
  const first = consume(`127.0.0.1:${master.listenPort()}`)
  await first.ready()
  await waitFor('4 messages consumed', () => got.length >= 4, 10000)
  await waitFor('offsets committed on the master', () => queues.every((q) => master.consumerOffset(group, topic, q) === 2))
  await first.close()
  // Two more a queue, which the consumer has not seen. The slave has the commits, and the group
  // and its retry topic (a slave serves only groups its master has; config sync writes them
  // to RocketMQ's files under config/).
  for (let i = 0; i < 4; i++) await send(`after-${i}`)
  await waitFor('offsets synced to the slave', () => queues.every((q) => slave.consumerOffset(group, topic, q) === 2))
  const synced = (file, name) => {
    try {
      return fs.readFileSync(path.join(slaveDir, 'config', file), 'utf8').includes(`"${name}"`)
    } catch {
      return false
    }
  }
  await waitFor('the group synced to the slave', () => synced('subscriptionGroup.json', group) && synced('topics.json', `%RETRY%${group}`))
  await closeProducer()
  await closeMaster()
  await waitFor('the slave to notice', () => !slave.offsets().connected)

  // A new consumer of the group, with the slave as its name server, reads on from the commits.
  const second = consume(`127.0.0.1:${slave.listenPort()}`)
  await second.ready()
  await waitFor('8 messages consumed', () => got.length >= 8, 10000)
  assert.deepEqual(got.slice(0, 4).sort(), ['before-0', 'before-1', 'before-2', 'before-3'])
  assert.deepEqual(got.slice(4).sort(), ['after-0', 'after-1', 'after-2', 'after-3'])
  await waitFor('offsets committed on the slave', () => queues.every((q) => slave.consumerOffset(group, topic, q) === 4))
  assert.equal(got.length, 8)
  assert.deepEqual(unexpectedErrors(errors, group), [])
  done()
})

test('ali-ons signs its requests for a master with aclEnable; a wrong secret stores nothing', { timeout: 15000 }, async (t) => {
  const dir = tmpStore(t, 'alions-acl')
  const aclFile = path.join(dir, 'plain_acl.yml')
  const topic = 'AliOnsAcl'
  // One admin account (UPDATE_AND_CREATE_TOPIC is an admin code) with PUB and SUB on the
  // topic only; no white list, so every request must carry a valid signature.
  fs.writeFileSync(
    aclFile,
    [
      'accounts:',
      '  - accessKey: alionsAK',
      '    secretKey: alions-secret-1',
      '    admin: true',
      '    defaultTopicPerm: DENY',
      '    defaultGroupPerm: SUB',
      '    topicPerms:',
      `      - ${topic}=PUB|SUB`,
      '',
    ].join('\n'),
  )
  const master = await rmqha.startMaster(
    brokerConfig(path.join(dir, 'store'), 'ASYNC_MASTER', {
      brokerClusterName: 'DefaultCluster',
      aclEnable: true,
      aclFilePath: aclFile,
    }),
  )
  cleanup(t, () => master.close())

  // ali-ons signs as RocketMQ's AclClientRPCHook does (HMAC-SHA1 over the sorted header
  // values and the body), with an extra OnsChannel field that the signature covers.
  const { producer, errors, createTopic, clientOptions, done } = await aliOns(t, master, {
    accessKey: 'alionsAK',
    secretKey: 'alions-secret-1',
  })
  await createTopic(topic, 1)
  const r = await within('a signed send', 10000, producer.send(new Message(topic, 'TagA', Buffer.from('signed'))))
  assert.equal(r.sendStatus, 'SEND_OK', JSON.stringify(r))
  await waitFor('the signed send dispatched', () => master.queueMaxOffset(topic, 0) === 1)
  const got = await master.getMessages(topic, 0, 0, 8)
  assert.deepEqual(got.messages.map((m) => m.body.toString()), ['signed'])

  // A client with a wrong secret (its own instance: ali-ons shares one client, credentials
  // included, among producers of one instanceName): its route lookups and sends are refused,
  // and nothing is stored.
  const wrong = new Producer({
    ...clientOptions,
    instanceName: 'wrong-secret',
    producerGroup: 'PID_RMQHA_ALIONS_WRONG',
    secretKey: 'not-the-secret',
  })
  wrong.on('error', () => {}) // its refusals, expected
  cleanup(t, () => within('closing the wrong producer', 5000, wrong.close()))
  await within('the wrong producer to start', 10000, wrong.ready())
  await assert.rejects(
    within('a send with a wrong secret', 10000, wrong.send(new Message(topic, 'TagA', Buffer.from('forged')))),
    /AclException: Check signature failed for accessKey=alionsAK/,
  )
  assert.equal(master.queueMaxOffset(topic, 0), 1, 'a send signed with a wrong secret was stored')
  assert.deepEqual(unexpectedErrors(errors, 'none'), [])
  done()
})
