/* Helpers shared by the C tests: checks that name the failing call and rmqha's message,
 * temporary store directories (mkdtemp, removed afterwards), and waiting on a condition with
 * a deadline. Include it first: it sets the feature macros for mkdtemp and nftw. */
#ifndef RMQHA_TEST_UTIL_H
#define RMQHA_TEST_UTIL_H

#define _XOPEN_SOURCE 700

#include <ftw.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rmqha.h"

static inline const char *last_error(void) {
  static _Thread_local char buf[1024];
  rmqha_last_error_message(buf, sizeof buf);
  return buf;
}

static inline void fail(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s:%d: ", file, line);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(1);
}

/* A call that must return RMQHA_STATUS_OK. */
#define CHECK_OK(call)                                                                    \
  do {                                                                                    \
    rmqha_status s_ = (call);                                                             \
    if (s_ != RMQHA_STATUS_OK)                                                            \
      fail(__FILE__, __LINE__, "%s returned %s: %s", #call, rmqha_status_name(s_),        \
           last_error());                                                                 \
  } while (0)

/* A call that must return `want`, leaving a non-empty last-error message. */
#define CHECK_STATUS(call, want)                                                          \
  do {                                                                                    \
    rmqha_status s_ = (call);                                                             \
    if (s_ != (want))                                                                     \
      fail(__FILE__, __LINE__, "%s returned %s, expected %s (last error: %s)", #call,     \
           rmqha_status_name(s_), rmqha_status_name(want), last_error());                 \
    if ((want) != RMQHA_STATUS_OK && last_error()[0] == '\0')                             \
      fail(__FILE__, __LINE__, "%s left no error message", #call);                        \
  } while (0)

#define CHECK(cond, ...)                                                                  \
  do {                                                                                    \
    if (!(cond)) fail(__FILE__, __LINE__, "check failed: " #cond " -- " __VA_ARGS__);     \
  } while (0)

static inline double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Polls `cond(ctx)` every millisecond until it holds (true) or `timeout_ms` passes (false). */
static inline bool wait_until(bool (*cond)(void *), void *ctx, double timeout_ms) {
  double deadline = now_ms() + timeout_ms;
  for (;;) {
    if (cond(ctx)) return true;
    if (now_ms() >= deadline) return false;
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
  }
}

/* A new empty directory under $TMPDIR (or /tmp); the caller frees the string. */
static inline char *make_dir(const char *prefix) {
  const char *tmp = getenv("TMPDIR");
  if (tmp == NULL || tmp[0] == '\0') tmp = "/tmp";
  size_t n = strlen(tmp) + strlen(prefix) + 16;
  char *path = malloc(n);
  CHECK(path != NULL, "malloc");
  snprintf(path, n, "%s/%s-XXXXXX", tmp, prefix);
  CHECK(mkdtemp(path) != NULL, "mkdtemp %s", path);
  return path;
}

static inline int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(path);
}

/* Removes a directory tree and frees its path. */
static inline void remove_dir(char *path) {
  CHECK(nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0, "removing %s", path);
  free(path);
}

/* A config for tests: 127.0.0.1, ports picked by the kernel, small files (fast to create,
 * cheap under valgrind). `role` is ASYNC_MASTER, SYNC_MASTER or SLAVE. */
static inline rmqha_config *test_config(const char *dir, const char *role) {
  rmqha_config *cfg = NULL;
  CHECK_OK(rmqha_config_new(&cfg));
  const char *kv[][2] = {
      {"storePathRootDir", dir},
      {"brokerRole", role},
      {"brokerName", "broker-c"},
      {"brokerId", strcmp(role, "SLAVE") == 0 ? "1" : "0"},
      {"bindAddress", "127.0.0.1"},
      {"brokerIP1", "127.0.0.1"},
      {"listenPort", "0"},
      {"haListenPort", "0"},
      {"mappedFileSizeCommitLog", "1048576"},
      {"mappedFileSizeConsumeQueue", "6000"},
      {"maxHashSlotNum", "64"},
      {"maxIndexNum", "256"},
      {"flushIntervalCommitLog", "50"},
      {"flushIntervalConsumeQueue", "50"},
      /* Generous: a slow machine (or valgrind) must not turn PUT_OK into a timeout. */
      {"slaveTimeout", "20000"},
  };
  for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) CHECK_OK(rmqha_config_set(cfg, kv[i][0], kv[i][1]));
  return cfg;
}

/* A slave config replicating from `master`. */
static inline rmqha_config *slave_config(const char *dir, const rmqha_broker *master) {
  uint16_t ha_port = 0;
  CHECK_OK(rmqha_ha_port(master, &ha_port));
  CHECK(ha_port != 0, "the master's HA port");
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%u", (unsigned)ha_port);
  rmqha_config *cfg = test_config(dir, "SLAVE");
  CHECK_OK(rmqha_config_set(cfg, "haMasterAddress", addr));
  return cfg;
}

static inline bool slave_transferring(void *master) {
  rmqha_slave_info_t info;
  return rmqha_slave_info(master, 0, &info) == RMQHA_STATUS_OK && info.transferring;
}

/* Waits until a slave is connected to `master` and being streamed to. */
static inline void wait_for_slave(const rmqha_broker *master) {
  CHECK(wait_until(slave_transferring, (void *)master, 10000), "no slave connected within 10 s");
}

#endif
