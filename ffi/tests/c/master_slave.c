/* A SYNC_MASTER and a SLAVE in one C program: every put returns PUT_OK only once the slave
 * holds its bytes; the slave's offsets catch up; get_messages, message_by_id and query_by_key
 * read back what was put (also through tag and SQL92 selectors); the slave follows the master to new ports after a restart
 * (rmqha_set_master_address); consumer offsets round-trip; a put after shutdown fails.
 *
 * Usage: master_slave [MESSAGES]   (default 200; the valgrind run uses fewer) */
#include "test_util.h"

#define TOPIC "CTopic"

typedef struct {
  const rmqha_broker *broker;
  int32_t queue;
  int64_t want;
} queue_wait;

static bool queue_reached(void *p) {
  queue_wait *w = p;
  int64_t max = -1;
  return rmqha_queue_max_offset(w->broker, TOPIC, w->queue, &max) == RMQHA_STATUS_OK && max >= w->want;
}

static bool later_delivered(void *p) {
  int64_t max = -1;
  return rmqha_queue_max_offset(p, "Later", 0, &max) == RMQHA_STATUS_OK && max == 1;
}

typedef struct {
  const rmqha_broker *slave;
  int64_t want;
} acked_wait;

static bool slave_acked(void *p) {
  acked_wait *w = p;
  int64_t acked = -1;
  return rmqha_slave_ack_offset(w->slave, &acked) == RMQHA_STATUS_OK && acked == w->want;
}

/* Both the ConsumeQueue and the IndexFile have every stored record (the dispatcher writes a
 * record's queue entry, then its index entries). */
static bool fully_dispatched(void *p) {
  rmqha_offsets_t o;
  return rmqha_offsets(p, &o) == RMQHA_STATUS_OK && o.dispatch_behind_bytes == 0;
}

static void body_of(int i, char *buf, size_t len) { snprintf(buf, len, "body-%d-%0*d", i, 40, i); }

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 200;
  CHECK(n >= 6, "at least 6 messages");
  CHECK(strcmp(rmqha_version(), RMQHA_VERSION_STRING) == 0, "header %s, library %s", RMQHA_VERSION_STRING,
        rmqha_version());

  char *master_dir = make_dir("rmqha-c-master");
  char *slave_dir = make_dir("rmqha-c-slave");

  rmqha_config *cfg = test_config(master_dir, "SYNC_MASTER");
  rmqha_broker *master = NULL;
  CHECK_OK(rmqha_start_master(cfg, &master));
  rmqha_config_free(cfg); /* the broker copied it */

  uint16_t listen_port = 0;
  CHECK_OK(rmqha_listen_port(master, &listen_port));
  CHECK(listen_port != 0, "a bound remoting port");

  cfg = slave_config(slave_dir, master);
  rmqha_broker *slave = NULL;
  CHECK_OK(rmqha_start_slave(cfg, &slave));
  rmqha_config_free(cfg);
  wait_for_slave(master);

  /* Queue 0 through rmqha_put_message_sync, queue 1 through the _to_queue form. */
  rmqha_put_result_t *puts = calloc((size_t)n, sizeof *puts);
  CHECK(puts != NULL, "calloc");
  int64_t per_queue[2] = {0, 0};
  for (int i = 0; i < n; i++) {
    char body[64], keys[64];
    body_of(i, body, sizeof body);
    snprintf(keys, sizeof keys, "key-%d order-%d", i, i / 10);
    const char *tags = i % 2 == 0 ? "even" : "odd";
    rmqha_put_result_t *r = &puts[i];
    if (i % 2 == 0)
      CHECK_OK(rmqha_put_message_sync(master, TOPIC, (const uint8_t *)body, strlen(body), tags, keys, r));
    else
      CHECK_OK(rmqha_put_message_sync_to_queue(master, TOPIC, 1, (const uint8_t *)body, strlen(body), tags, keys, r));
    CHECK(r->status == RMQHA_PUT_STATUS_PUT_OK, "put %d: %s", i, rmqha_put_status_name(r->status));
    CHECK(r->queue_id == i % 2, "put %d went to queue %d", i, r->queue_id);
    CHECK(r->queue_offset == per_queue[i % 2]++, "put %d: queue offset %lld", i, (long long)r->queue_offset);
    CHECK(strlen(r->msg_id) == 32, "put %d: msg id %s", i, r->msg_id);
    CHECK(r->size > (int32_t)strlen(body), "put %d: record size %d", i, r->size);
    /* The promise of SYNC_MASTER, checked right after the return: the slave has the bytes. */
    int64_t slave_max = 0;
    CHECK_OK(rmqha_max_offset(slave, &slave_max));
    CHECK(slave_max >= r->phy_offset + r->size, "put %d: slave at %lld, record ends at %lld", i,
          (long long)slave_max, (long long)(r->phy_offset + r->size));
  }

  /* The slave dispatches replicated bytes into its ConsumeQueues: wait for both queues. */
  for (int32_t q = 0; q < 2; q++) {
    queue_wait on_slave = {slave, q, per_queue[q]}, on_master = {master, q, per_queue[q]};
    CHECK(wait_until(queue_reached, &on_slave, 10000), "slave queue %d did not reach %lld", q,
          (long long)per_queue[q]);
    CHECK(wait_until(queue_reached, &on_master, 10000), "master queue %d", q);
  }
  CHECK(wait_until(fully_dispatched, master, 10000), "the master's index did not catch up");
  CHECK(wait_until(fully_dispatched, slave, 10000), "the slave's index did not catch up");

  /* Offsets on both sides. */
  rmqha_offsets_t mo, so;
  CHECK_OK(rmqha_offsets(master, &mo));
  CHECK_OK(rmqha_offsets(slave, &so));
  CHECK(mo.role == RMQHA_ROLE_SYNC_MASTER && so.role == RMQHA_ROLE_SLAVE, "roles %u %u", mo.role, so.role);
  CHECK(mo.max_offset == puts[n - 1].phy_offset + puts[n - 1].size, "master max %lld", (long long)mo.max_offset);
  CHECK(so.max_offset == mo.max_offset, "slave max %lld vs %lld", (long long)so.max_offset, (long long)mo.max_offset);
  CHECK(mo.slave_ack_offset == mo.max_offset, "master ack offset %lld", (long long)mo.slave_ack_offset);
  CHECK(mo.slave_count == 1 && mo.listen_port == listen_port && mo.ha_port != 0, "master snapshot");
  CHECK(mo.min_offset == 0 && mo.master_address[0] == '\0' && !mo.connected, "master-only fields");
  CHECK(so.connected && so.ha_port == 0 && so.slave_count == 0, "slave snapshot");
  char want_addr[64];
  snprintf(want_addr, sizeof want_addr, "127.0.0.1:%u", (unsigned)mo.ha_port);
  CHECK(strcmp(so.master_address, want_addr) == 0, "slave's master address %s", so.master_address);
  /* The slave records what it acked just after sending the ack: wait for it. */
  acked_wait aw = {slave, mo.max_offset};
  CHECK(wait_until(slave_acked, &aw, 10000), "the slave's own ack offset did not reach %lld", (long long)mo.max_offset);
  int64_t v = 0;
  CHECK_OK(rmqha_min_offset(slave, &v));
  CHECK(v == 0, "slave min offset %lld", (long long)v);
  CHECK_OK(rmqha_queue_min_offset(slave, TOPIC, 1, &v));
  CHECK(v == 0, "queue min offset %lld", (long long)v);
  CHECK_OK(rmqha_flushed_offset(master, &v));
  CHECK(v >= 0 && v <= mo.max_offset, "flushed %lld", (long long)v);
  /* Metrics as Prometheus text: the length first, then the text into a buffer that fits. */
  size_t mlen = 0;
  CHECK_OK(rmqha_metrics(master, NULL, 0, &mlen));
  CHECK(mlen > 100, "metrics length %zu", mlen);
  char *metrics = malloc(mlen + 1);
  CHECK(metrics != NULL, "malloc");
  size_t mlen2 = 0;
  CHECK_OK(rmqha_metrics(master, metrics, mlen + 1, &mlen2));
  CHECK(mlen2 == mlen && strlen(metrics) == mlen, "metrics %zu then %zu bytes", mlen, mlen2);
  char want_line[64];
  snprintf(want_line, sizeof want_line, "\nrmqha_puts_waited_total{status=\"PUT_OK\"} %d\n", n);
  CHECK(strstr(metrics, want_line) != NULL, "no %s in:\n%s", want_line, metrics);
  CHECK(strstr(metrics, "role=\"SYNC_MASTER\"") != NULL && strstr(metrics, "\nrmqha_ha_slaves 1\n") != NULL,
        "metrics:\n%s", metrics);
  free(metrics);
  char small[16];
  CHECK_OK(rmqha_metrics(slave, small, sizeof small, &mlen));
  CHECK(mlen >= sizeof small && strlen(small) == sizeof small - 1, "truncated to the buffer");
  rmqha_slave_info_t info;
  CHECK_OK(rmqha_slave_info(master, 0, &info));
  CHECK(info.ack_offset == mo.max_offset && info.transferring, "slave info ack %lld", (long long)info.ack_offset);
  CHECK(strncmp(info.addr, "127.0.0.1:", 10) == 0, "slave addr %s", info.addr);
  /* It reported after the master accepted it (the ack just waited for, at the latest). */
  CHECK(info.last_report_ms <= info.connected_ms, "last report %llu ms ago, connected %llu ms",
        (unsigned long long)info.last_report_ms, (unsigned long long)info.connected_ms);

  /* Read queue 1 back from the slave, in pages of 3. */
  int64_t offset = 0;
  int seen = 0;
  for (;;) {
    rmqha_get_result_t *got = NULL;
    CHECK_OK(rmqha_get_messages(slave, TOPIC, 1, offset, 3, &got));
    if (got->status != RMQHA_GET_STATUS_FOUND) {
      CHECK(got->status == RMQHA_GET_STATUS_OFFSET_OVERFLOW_ONE, "end of queue: %s",
            rmqha_get_status_name(got->status));
      CHECK(got->message_count == 0 && got->messages == NULL, "no messages at the end");
      CHECK(got->max_offset == per_queue[1], "queue max %lld", (long long)got->max_offset);
      rmqha_get_result_free(got);
      break;
    }
    CHECK(got->message_count >= 1 && got->message_count <= 3, "page of %zu", got->message_count);
    for (size_t k = 0; k < got->message_count; k++) {
      const rmqha_message_t *m = &got->messages[k];
      int i = 2 * seen + 1; /* queue 1 holds the odd puts */
      char body[64], keys[64];
      body_of(i, body, sizeof body);
      snprintf(keys, sizeof keys, "key-%d order-%d", i, i / 10);
      CHECK(m->body_len == strlen(body) && memcmp(m->body, body, m->body_len) == 0, "message %d body", i);
      CHECK(strcmp(m->topic, TOPIC) == 0 && m->queue_id == 1 && m->queue_offset == seen, "message %d place", i);
      CHECK(m->tags != NULL && strcmp(m->tags, "odd") == 0, "message %d tags", i);
      CHECK(m->keys != NULL && strcmp(m->keys, keys) == 0, "message %d keys %s", i, m->keys);
      CHECK(strcmp(m->msg_id, puts[i].msg_id) == 0, "message %d id %s vs %s", i, m->msg_id, puts[i].msg_id);
      CHECK(m->phy_offset == puts[i].phy_offset && m->store_size == puts[i].size, "message %d offsets", i);
      CHECK(m->store_timestamp == puts[i].store_timestamp && m->born_timestamp > 0, "message %d times", i);
      bool has_tags = false;
      for (size_t p = 0; p < m->property_count; p++)
        has_tags |= strcmp(m->properties[p].key, "TAGS") == 0 && strcmp(m->properties[p].value, "odd") == 0;
      CHECK(has_tags, "message %d TAGS property among %zu", i, m->property_count);
      seen++;
    }
    /* Not next_begin_offset: on a SLAVE with offsetCheckInSlave=false the core returns the
     * requested offset unchanged even for FOUND (see the report); the next unread queue
     * offset is the last message's plus one either way. */
    offset = got->messages[got->message_count - 1].queue_offset + 1;
    rmqha_get_result_free(got);
  }
  CHECK(seen == per_queue[1], "read %d of %lld", seen, (long long)per_queue[1]);
  /* On the master next_begin_offset is where to read next. */
  rmqha_get_result_t *page = NULL;
  CHECK_OK(rmqha_get_messages(master, TOPIC, 1, 0, 3, &page));
  CHECK(page->status == RMQHA_GET_STATUS_FOUND && page->message_count == 3 && page->next_begin_offset == 3,
        "master page: %s, %zu messages, next %lld", rmqha_get_status_name(page->status), page->message_count,
        (long long)page->next_begin_offset);
  rmqha_get_result_free(page);

  /* Selected reads. SQL92 over the KEYS property, on the slave: queue 0 holds the even puts,
   * so puts 2 and 4 are its offsets 1 and 2. */
  CHECK_OK(rmqha_get_messages_selected(slave, TOPIC, 0, 0, 32, NULL, "KEYS IN ('key-2 order-0', 'key-4 order-0')",
                                       &page));
  CHECK(page->status == RMQHA_GET_STATUS_FOUND && page->message_count == 2, "sql read: %s, %zu messages",
        rmqha_get_status_name(page->status), page->message_count);
  CHECK(page->messages[0].queue_offset == 1 && page->messages[1].queue_offset == 2 &&
            strcmp(page->messages[1].msg_id, puts[4].msg_id) == 0,
        "sql read offsets %lld %lld", (long long)page->messages[0].queue_offset,
        (long long)page->messages[1].queue_offset);
  rmqha_get_result_free(page);
  /* A tag expression: every message of queue 1 is "odd", none is "even". */
  CHECK_OK(rmqha_get_messages_selected(master, TOPIC, 1, 0, 3, "even || odd", NULL, &page));
  CHECK(page->status == RMQHA_GET_STATUS_FOUND && page->message_count == 3 && page->next_begin_offset == 3,
        "tag read: %s, %zu messages", rmqha_get_status_name(page->status), page->message_count);
  rmqha_get_result_free(page);
  CHECK_OK(rmqha_get_messages_selected(master, TOPIC, 1, 0, 3, "even", NULL, &page));
  CHECK(page->status == RMQHA_GET_STATUS_NO_MATCHED_MESSAGE && page->message_count == 0 &&
            page->next_begin_offset == per_queue[1],
        "no match: %s, %zu messages, next %lld", rmqha_get_status_name(page->status), page->message_count,
        (long long)page->next_begin_offset);
  rmqha_get_result_free(page);
  /* Neither expression is the plain read; both, or SQL that does not compile, are refused. */
  CHECK_OK(rmqha_get_messages_selected(master, TOPIC, 1, 0, 3, NULL, NULL, &page));
  CHECK(page->status == RMQHA_GET_STATUS_FOUND && page->message_count == 3, "plain read");
  rmqha_get_result_free(page);
  CHECK_STATUS(rmqha_get_messages_selected(master, TOPIC, 1, 0, 3, "odd", "a = 1", &page),
               RMQHA_STATUS_INVALID_ARGUMENT);
  CHECK(page == NULL && strstr(last_error(), "not both") != NULL, "both: %s", last_error());
  CHECK_STATUS(rmqha_get_messages_selected(master, TOPIC, 1, 0, 3, NULL, "KEYS =", &page),
               RMQHA_STATUS_INVALID_ARGUMENT);
  CHECK(page == NULL && strstr(last_error(), "column 7") != NULL, "bad sql: %s", last_error());

  /* By id on the slave (ids name the master's host:port, the record is the same). */
  rmqha_get_result_t *one = NULL;
  CHECK_OK(rmqha_message_by_id(slave, puts[2].msg_id, &one));
  CHECK(one->status == RMQHA_GET_STATUS_FOUND && one->message_count == 1, "by id");
  CHECK(one->messages[0].phy_offset == puts[2].phy_offset, "by id offset");
  rmqha_get_result_free(one);

  /* By key, through the IndexFile, newest first. */
  rmqha_get_result_t *by_key = NULL;
  CHECK_OK(rmqha_query_by_key(master, TOPIC, "order-0", 32, &by_key));
  CHECK(by_key->status == RMQHA_GET_STATUS_FOUND, "by key: %s", rmqha_get_status_name(by_key->status));
  size_t want_keyed = n < 10 ? (size_t)n : 10;
  CHECK(by_key->message_count == want_keyed, "by key: %zu messages", by_key->message_count);
  rmqha_get_result_free(by_key);
  CHECK_OK(rmqha_query_by_key(master, TOPIC, "no-such-key", 32, &by_key));
  CHECK(by_key->status == RMQHA_GET_STATUS_NO_MATCHED_MESSAGE && by_key->message_count == 0, "no key");
  rmqha_get_result_free(by_key);
  /* Within store times: the newest one's alone, then none before the oldest. */
  CHECK_OK(rmqha_query_by_key(master, TOPIC, "order-0", 32, &by_key));
  int64_t newest = by_key->messages[0].store_timestamp;
  int64_t oldest = by_key->messages[by_key->message_count - 1].store_timestamp;
  rmqha_get_result_free(by_key);
  CHECK_OK(rmqha_query_by_key_between(master, TOPIC, "order-0", 32, newest, newest, &by_key));
  CHECK(by_key->status == RMQHA_GET_STATUS_FOUND && by_key->message_count >= 1, "at the newest time");
  for (size_t i = 0; i < by_key->message_count; i++)
    CHECK(by_key->messages[i].store_timestamp == newest, "time bound");
  rmqha_get_result_free(by_key);
  CHECK_OK(rmqha_query_by_key_between(master, TOPIC, "order-0", 32, 0, oldest - 1, &by_key));
  CHECK(by_key->status == RMQHA_GET_STATUS_NO_MATCHED_MESSAGE && by_key->message_count == 0, "before the oldest");
  rmqha_get_result_free(by_key);
  CHECK_STATUS(rmqha_query_by_key_between(master, TOPIC, "order-0", 32, 5, 4, &by_key), RMQHA_STATUS_INVALID_ARGUMENT);
  CHECK(by_key == NULL, "a failed read leaves NULL");

  /* The master restarts on its store with new ports. Told the new HA address, the slave
   * follows it, and a SYNC put is PUT_OK again with its bytes on the slave at the return. */
  CHECK_STATUS(rmqha_set_master_address(master, "127.0.0.1:1"), RMQHA_STATUS_WRONG_ROLE);
  CHECK_STATUS(rmqha_set_master_address(slave, "no port"), RMQHA_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(last_error(), "no port") != NULL, "error names the address: %s", last_error());
  CHECK_OK(rmqha_shutdown(master));
  rmqha_broker_free(master);
  cfg = test_config(master_dir, "SYNC_MASTER");
  CHECK_OK(rmqha_start_master(cfg, &master));
  rmqha_config_free(cfg);
  uint16_t new_ha = 0;
  CHECK_OK(rmqha_ha_port(master, &new_ha));
  snprintf(want_addr, sizeof want_addr, "127.0.0.1:%u", (unsigned)new_ha);
  CHECK_OK(rmqha_set_master_address(slave, want_addr));
  wait_for_slave(master);
  rmqha_put_result_t again;
  CHECK_OK(rmqha_put_message_sync(master, TOPIC, (const uint8_t *)"after restart", 13, NULL, NULL, &again));
  CHECK(again.status == RMQHA_PUT_STATUS_PUT_OK && again.phy_offset == mo.max_offset, "put after restart: %s at %lld",
        rmqha_put_status_name(again.status), (long long)again.phy_offset);
  CHECK_OK(rmqha_max_offset(slave, &v));
  CHECK(v == again.phy_offset + again.size, "slave at %lld after the restart", (long long)v);
  CHECK_OK(rmqha_offsets(slave, &so));
  CHECK(so.connected && strcmp(so.master_address, want_addr) == 0, "slave follows %s", so.master_address);
  CHECK_OK(rmqha_offsets(master, &mo));
  /* PUT_OK means stored (and on the slave), not yet dispatched: the ConsumeQueue entry comes
   * from the dispatcher a moment later, as in RocketMQ. Wait for it before reading queue ends. */
  queue_wait dispatched = {master, again.queue_id, again.queue_offset + 1};
  CHECK(wait_until(queue_reached, &dispatched, 10000), "the put after the restart was not dispatched");

  /* Consumer offsets. */
  CHECK_OK(rmqha_consumer_offset(master, "group-c", TOPIC, 0, &v));
  CHECK(v == -1, "never committed: %lld", (long long)v);
  /* An offset names a position in the queue: past its end is refused. */
  int64_t queue_end = 0;
  CHECK_OK(rmqha_queue_max_offset(master, TOPIC, 0, &queue_end));
  CHECK(queue_end >= 1, "queue 0 ends at %lld", (long long)queue_end);
  /* By store time: after every message, LOWER is the next offset and UPPER the last message;
     before every message both answer the first. */
  CHECK_OK(rmqha_queue_offset_by_time(master, TOPIC, 0, INT64_MAX, RMQHA_TIME_BOUNDARY_LOWER, &v));
  CHECK(v == queue_end, "lower bound of the future: %lld", (long long)v);
  CHECK_OK(rmqha_queue_offset_by_time(master, TOPIC, 0, INT64_MAX, RMQHA_TIME_BOUNDARY_UPPER, &v));
  CHECK(v == queue_end - 1, "upper bound of the future: %lld", (long long)v);
  CHECK_OK(rmqha_queue_offset_by_time(master, TOPIC, 0, 0, RMQHA_TIME_BOUNDARY_UPPER, &v));
  CHECK(v == 0, "upper bound of 1970: %lld", (long long)v);
  CHECK_STATUS(rmqha_commit_consumer_offset(master, "group-c", TOPIC, 0, queue_end + 1), RMQHA_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(last_error(), "past the end") != NULL, "error says why: %s", last_error());
  CHECK_OK(rmqha_commit_consumer_offset(master, "group-c", TOPIC, 0, queue_end));
  CHECK_OK(rmqha_consumer_offset(master, "group-c", TOPIC, 0, &v));
  CHECK(v == queue_end, "committed: %lld", (long long)v);

  /* A delayed message (DELAY = level 1, a second) with a property of the user's own: stored
     now, delivered to its topic a second later, without DELAY. The tags argument wins over a
     TAGS property; with no keys argument the KEYS property stays (as in Python and Node). */
  rmqha_property_t props[] = {{"DELAY", "1"}, {"color", "red"}, {"TAGS", "NotTheTag"}, {"KEYS", "k1 k2"}};
  rmqha_put_result_t delayed;
  CHECK_OK(rmqha_put_message_sync_with_properties(master, "Later", 0, (const uint8_t *)"later", 5, "TagL", NULL,
                                                  props, 4, &delayed));
  CHECK(delayed.status == RMQHA_PUT_STATUS_PUT_OK, "delayed put: %s", rmqha_put_status_name(delayed.status));
  CHECK(wait_until(later_delivered, (void *)master, 15000), "the delayed message was delivered");
  rmqha_get_result_t *later = NULL;
  CHECK_OK(rmqha_get_messages(master, "Later", 0, 0, 4, &later));
  CHECK(later->message_count == 1 && later->messages[0].body_len == 5, "delivered: %zu", later->message_count);
  const rmqha_message_t *lm = &later->messages[0];
  bool red = false, delay = false;
  for (size_t i = 0; i < lm->property_count; i++) {
    red |= strcmp(lm->properties[i].key, "color") == 0 && strcmp(lm->properties[i].value, "red") == 0;
    delay |= strcmp(lm->properties[i].key, "DELAY") == 0;
  }
  CHECK(red && !delay && strcmp(lm->tags, "TagL") == 0, "delivered properties, tags %s", lm->tags);
  CHECK(lm->keys != NULL && strcmp(lm->keys, "k1 k2") == 0, "delivered keys %s", lm->keys ? lm->keys : "(null)");
  rmqha_get_result_free(later);
  CHECK_OK(rmqha_offsets(master, &mo)); /* the log's end, the delivery included */

  /* Stop: the slave first, then the master; a put after shutdown stores nothing. */
  CHECK_OK(rmqha_shutdown(slave));
  CHECK_OK(rmqha_shutdown(master));
  CHECK_OK(rmqha_shutdown(master)); /* idempotent */
  rmqha_put_result_t late;
  CHECK_STATUS(rmqha_put_message_sync(master, TOPIC, (const uint8_t *)"x", 1, NULL, NULL, &late),
               RMQHA_STATUS_PUT_FAILED);
  CHECK(late.status == RMQHA_PUT_STATUS_SERVICE_NOT_AVAILABLE && late.phy_offset == -1 && late.msg_id[0] == '\0',
        "late put: %s", rmqha_put_status_name(late.status));
  /* A commit after shutdown would never be persisted: refused, not silently lost. */
  CHECK_STATUS(rmqha_commit_consumer_offset(master, "group-c", TOPIC, 0, 0), RMQHA_STATUS_STORE);
  CHECK_OK(rmqha_consumer_offset(master, "group-c", TOPIC, 0, &v));
  CHECK(v == queue_end, "the refused commit changed nothing: %lld", (long long)v);
  CHECK_OK(rmqha_max_offset(master, &v)); /* offsets still answer */
  CHECK(v == mo.max_offset, "max offset after shutdown %lld", (long long)v);
  rmqha_broker_free(slave);
  rmqha_broker_free(master);
  free(puts);
  remove_dir(master_dir);
  remove_dir(slave_dir);
  printf("master_slave: %d puts PUT_OK, slave caught up, reads verified\n", n);
  return 0;
}
