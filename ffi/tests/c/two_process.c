/* The master in this process, the slave in another: every SYNC_MASTER put that returns PUT_OK
 * is in the slave process's store. The slave process is killed with SIGKILL right after the
 * last put (no shutdown, no flush), then a third process opens the slave's store with no master
 * to catch up from (haMasterAddress points at a closed port) and must find every message.
 *
 * Usage: two_process [MESSAGES]                 (default 100; the parent)
 *        two_process slave DIR HA_ADDR          (runs until killed)
 *        two_process check DIR MESSAGES END     (reads the store, exits 0 if all is there) */
#include "test_util.h" /* first: it sets the feature macros */

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#define TOPIC "TwoProcess"

extern char **environ;

static void body_of(int i, char *buf, size_t len) { snprintf(buf, len, "cross-process message %d %030d", i, i); }

static pid_t spawn_self(char *const args[]) {
  pid_t pid;
  int err = posix_spawn(&pid, "/proc/self/exe", NULL, NULL, args, environ);
  CHECK(err == 0, "posix_spawn: %s", strerror(err));
  return pid;
}

static _Noreturn void run_slave(const char *dir, const char *ha_addr) {
  rmqha_config *cfg = test_config(dir, "SLAVE");
  CHECK_OK(rmqha_config_set(cfg, "haMasterAddress", ha_addr));
  rmqha_broker *slave = NULL;
  CHECK_OK(rmqha_start_slave(cfg, &slave));
  rmqha_config_free(cfg);
  for (;;) pause(); /* replicates on rmqha's threads until the parent kills this process */
}

typedef struct {
  const rmqha_broker *b;
  int64_t want;
} queue_wait;

static bool dispatched(void *p) {
  queue_wait *w = p;
  int64_t max = -1;
  return rmqha_queue_max_offset(w->b, TOPIC, 0, &max) == RMQHA_STATUS_OK && max >= w->want;
}

static int run_check(const char *dir, int n, int64_t end) {
  rmqha_config *cfg = test_config(dir, "SLAVE");
  CHECK_OK(rmqha_config_set(cfg, "haMasterAddress", "127.0.0.1:1")); /* nobody: no catching up */
  rmqha_broker *b = NULL;
  CHECK_OK(rmqha_start_slave(cfg, &b));
  rmqha_config_free(cfg);
  int64_t max = 0;
  CHECK_OK(rmqha_max_offset(b, &max));
  CHECK(max >= end, "the killed slave's store ends at %lld, the last PUT_OK at %lld", (long long)max, (long long)end);
  queue_wait w = {b, n};
  CHECK(wait_until(dispatched, &w, 10000), "recovered store did not dispatch %d messages", n);
  int seen = 0;
  while (seen < n) {
    rmqha_get_result_t *got = NULL;
    CHECK_OK(rmqha_get_messages(b, TOPIC, 0, seen, 32, &got));
    CHECK(got->status == RMQHA_GET_STATUS_FOUND, "at %d: %s", seen, rmqha_get_status_name(got->status));
    for (size_t k = 0; k < got->message_count; k++, seen++) {
      char body[64];
      body_of(seen, body, sizeof body);
      const rmqha_message_t *m = &got->messages[k];
      CHECK(m->body_len == strlen(body) && memcmp(m->body, body, m->body_len) == 0, "message %d", seen);
    }
    rmqha_get_result_free(got);
  }
  CHECK_OK(rmqha_shutdown(b));
  rmqha_broker_free(b);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "slave") == 0) run_slave(argv[2], argv[3]);
  if (argc == 5 && strcmp(argv[1], "check") == 0) return run_check(argv[2], atoi(argv[3]), atoll(argv[4]));
  int n = argc > 1 ? atoi(argv[1]) : 100;
  CHECK(n >= 1, "messages");

  char *master_dir = make_dir("rmqha-c-2p-master");
  char *slave_dir = make_dir("rmqha-c-2p-slave");
  rmqha_config *cfg = test_config(master_dir, "SYNC_MASTER");
  rmqha_broker *master = NULL;
  CHECK_OK(rmqha_start_master(cfg, &master));
  rmqha_config_free(cfg);
  uint16_t ha_port = 0;
  CHECK_OK(rmqha_ha_port(master, &ha_port));
  char ha_addr[64];
  snprintf(ha_addr, sizeof ha_addr, "127.0.0.1:%u", (unsigned)ha_port);

  pid_t slave = spawn_self((char *const[]){argv[0], "slave", slave_dir, ha_addr, NULL});
  wait_for_slave(master);

  int64_t end = 0;
  for (int i = 0; i < n; i++) {
    char body[64];
    body_of(i, body, sizeof body);
    rmqha_put_result_t r;
    CHECK_OK(rmqha_put_message_sync(master, TOPIC, (const uint8_t *)body, strlen(body), NULL, NULL, &r));
    CHECK(r.status == RMQHA_PUT_STATUS_PUT_OK, "put %d: %s", i, rmqha_put_status_name(r.status));
    end = r.phy_offset + r.size;
  }
  /* No goodbye: the slave process dies with whatever it has. */
  CHECK(kill(slave, SIGKILL) == 0, "kill");
  int status = 0;
  CHECK(waitpid(slave, &status, 0) == slave && WIFSIGNALED(status), "the slave died by SIGKILL");

  char n_arg[16], end_arg[32];
  snprintf(n_arg, sizeof n_arg, "%d", n);
  snprintf(end_arg, sizeof end_arg, "%lld", (long long)end);
  pid_t check = spawn_self((char *const[]){argv[0], "check", slave_dir, n_arg, end_arg, NULL});
  CHECK(waitpid(check, &status, 0) == check, "waitpid");
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the check process failed (status %d)", status);

  CHECK_OK(rmqha_shutdown(master));
  rmqha_broker_free(master);
  remove_dir(master_dir);
  remove_dir(slave_dir);
  printf("two_process: %d PUT_OK puts all in the SIGKILLed slave process's store\n", n);
  return 0;
}
