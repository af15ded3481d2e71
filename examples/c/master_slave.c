/* rmqha from C: a SYNC_MASTER and its SLAVE, a few puts, a read on the slave.
 *
 * Build and run from the repository root:
 *
 *   cargo build -p rmqha-ffi
 *   cc -std=c11 -Wall -Wextra -I include examples/c/master_slave.c -L target/debug -lrmqha \
 *      -o target/debug/master_slave
 *   LD_LIBRARY_PATH=target/debug target/debug/master_slave
 *
 * (With CARGO_TARGET_DIR set, use $CARGO_TARGET_DIR/debug for target/debug. To link the static
 * library instead: replace `-L target/debug -lrmqha` with
 * `target/debug/librmqha.a -lpthread -ldl -lm -lrt -lutil -lgcc_s`.)
 *
 * Here both brokers run in one process to keep the example short; in production the master
 * and the slave run in different processes on different machines, each with the same calls. */
#define _XOPEN_SOURCE 700 /* mkdtemp, nftw */

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rmqha.h"

/* Prints rmqha's message for a failed call and exits. */
static void check(rmqha_status s, const char *what) {
  if (s == RMQHA_STATUS_OK) return;
  char msg[512];
  rmqha_last_error_message(msg, sizeof msg);
  fprintf(stderr, "%s failed: %s: %s\n", what, rmqha_status_name(s), msg);
  exit(1);
}

static rmqha_config *config(const char *dir, const char *role) {
  rmqha_config *cfg = NULL;
  check(rmqha_config_new(&cfg), "rmqha_config_new");
  check(rmqha_config_set(cfg, "storePathRootDir", dir), "storePathRootDir");
  check(rmqha_config_set(cfg, "brokerRole", role), "brokerRole");
  check(rmqha_config_set(cfg, "brokerId", strcmp(role, "SLAVE") == 0 ? "1" : "0"), "brokerId");
  check(rmqha_config_set(cfg, "bindAddress", "127.0.0.1"), "bindAddress");
  check(rmqha_config_set(cfg, "brokerIP1", "127.0.0.1"), "brokerIP1");
  check(rmqha_config_set(cfg, "listenPort", "0"), "listenPort"); /* 0: any free port */
  check(rmqha_config_set(cfg, "haListenPort", "0"), "haListenPort");
  check(rmqha_config_set(cfg, "mappedFileSizeCommitLog", "1048576"), "mappedFileSizeCommitLog");
  check(rmqha_config_set(cfg, "mappedFileSizeConsumeQueue", "6000"), "mappedFileSizeConsumeQueue");
  check(rmqha_config_set(cfg, "maxHashSlotNum", "1000"), "maxHashSlotNum");
  check(rmqha_config_set(cfg, "maxIndexNum", "4000"), "maxIndexNum");
  return cfg;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

int main(void) {
  printf("rmqha %s (header %s)\n", rmqha_version(), RMQHA_VERSION_STRING);
  char master_dir[] = "/tmp/rmqha-example-master-XXXXXX", slave_dir[] = "/tmp/rmqha-example-slave-XXXXXX";
  if (mkdtemp(master_dir) == NULL || mkdtemp(slave_dir) == NULL) return perror("mkdtemp"), 1;

  /* The master. A config is copied at start: free it right away. */
  rmqha_config *cfg = config(master_dir, "SYNC_MASTER");
  rmqha_broker *master = NULL;
  check(rmqha_start_master(cfg, &master), "rmqha_start_master");
  rmqha_config_free(cfg);
  uint16_t ha_port = 0;
  check(rmqha_ha_port(master, &ha_port), "rmqha_ha_port");

  /* The slave, pointed at the master's HA port. */
  char ha_addr[64];
  snprintf(ha_addr, sizeof ha_addr, "127.0.0.1:%u", (unsigned)ha_port);
  cfg = config(slave_dir, "SLAVE");
  check(rmqha_config_set(cfg, "haMasterAddress", ha_addr), "haMasterAddress");
  rmqha_broker *slave = NULL;
  check(rmqha_start_slave(cfg, &slave), "rmqha_start_slave");
  rmqha_config_free(cfg);

  /* Wait (up to 10 s) until the master streams to the slave; until then a SYNC_MASTER put
   * answers SLAVE_NOT_AVAILABLE: stored on the master only. */
  rmqha_slave_info_t info;
  for (double deadline = now_ms() + 10000;;) {
    if (rmqha_slave_info(master, 0, &info) == RMQHA_STATUS_OK && info.transferring) break;
    if (now_ms() > deadline) return fprintf(stderr, "no slave connected\n"), 1;
    nanosleep(&(struct timespec){0, 5000000}, NULL);
  }
  printf("slave %s connected to master HA port %u\n", info.addr, (unsigned)ha_port);

  /* Puts: each returns once the slave has acked the bytes (PUT_OK). */
  for (int i = 0; i < 5; i++) {
    char body[64], key[32];
    int len = snprintf(body, sizeof body, "hello from C #%d", i);
    snprintf(key, sizeof key, "order-%d", i);
    rmqha_put_result_t r;
    check(rmqha_put_message_sync(master, "ExampleTopic", (const uint8_t *)body, (size_t)len, "greeting", key, &r),
          "rmqha_put_message_sync");
    printf("put %d: %s id %s offset %lld queue %d/%lld\n", i, rmqha_put_status_name(r.status), r.msg_id,
           (long long)r.phy_offset, r.queue_id, (long long)r.queue_offset);
  }

  /* Offsets on both sides. */
  rmqha_offsets_t mo, so;
  check(rmqha_offsets(master, &mo), "rmqha_offsets");
  check(rmqha_offsets(slave, &so), "rmqha_offsets");
  printf("master max %lld acked by slave %lld; slave max %lld, connected %s\n", (long long)mo.max_offset,
         (long long)mo.slave_ack_offset, (long long)so.max_offset, so.connected ? "yes" : "no");

  /* Read queue 0 on the slave once it has dispatched all five (up to 10 s). */
  int64_t queued = 0;
  for (double deadline = now_ms() + 10000; queued < 5 && now_ms() < deadline;) {
    check(rmqha_queue_max_offset(slave, "ExampleTopic", 0, &queued), "rmqha_queue_max_offset");
    if (queued < 5) nanosleep(&(struct timespec){0, 5000000}, NULL);
  }
  rmqha_get_result_t *got = NULL;
  check(rmqha_get_messages(slave, "ExampleTopic", 0, 0, 32, &got), "rmqha_get_messages");
  size_t read = got->message_count;
  printf("slave read: %s, %zu messages\n", rmqha_get_status_name(got->status), read);
  for (size_t k = 0; k < got->message_count; k++) {
    const rmqha_message_t *m = &got->messages[k];
    printf("  %lld: %.*s [tags %s, keys %s]\n", (long long)m->queue_offset, (int)m->body_len, (const char *)m->body,
           m->tags ? m->tags : "-", m->keys ? m->keys : "-");
  }
  rmqha_get_result_free(got); /* frees every message and string in it */

  /* Stop the slave, then the master; free the handles. */
  check(rmqha_shutdown(slave), "rmqha_shutdown");
  check(rmqha_shutdown(master), "rmqha_shutdown");
  rmqha_broker_free(slave);
  rmqha_broker_free(master);
  nftw(master_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  nftw(slave_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  return read == 5 ? 0 : 1;
}
