'use strict'
// A broker in its own process, driven by the parent test over IPC (see helpers.js). It ends
// on 'close' by closing the broker and the IPC channel and exiting by itself: nothing the
// binding created may keep it alive.

const rmqha = require('..')

let broker = null

const commands = {
  async start({ role, config }) {
    broker = role === 'SLAVE' ? await rmqha.startSlave(config) : await rmqha.startMaster(config)
    return { listenPort: broker.listenPort(), haPort: broker.haPort() }
  },
  offsets: () => broker.offsets(),
  async getMessages({ topic, queueId, offset, max }) {
    const r = await broker.getMessages(topic, queueId, offset, max)
    return { ...r, messages: r.messages.map((m) => ({ ...m, body: m.body.toString('base64') })) }
  },
  queueMaxOffset: ({ topic, queueId }) => broker.queueMaxOffset(topic, queueId),
  async put({ topic, body }) {
    return broker.putMessage(topic, body)
  },
  commitConsumerOffset: ({ group, topic, queueId, offset }) => {
    broker.commitConsumerOffset(group, topic, queueId, offset)
    return broker.consumerOffset(group, topic, queueId)
  },
  async close() {
    await broker.close()
    return true
  },
}

process.on('message', async ({ id, cmd, args }) => {
  try {
    const value = await commands[cmd](args)
    // After 'close' the channel goes too, so the process can end by itself.
    process.send({ id, ok: true, value }, cmd === 'close' ? () => process.disconnect() : undefined)
  } catch (e) {
    process.send({ id, ok: false, code: e.code, putStatus: e.putStatus, message: e.message })
  }
})
