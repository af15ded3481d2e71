/* Error paths: NULL and invalid arguments, bad config keys and values, bad properties files,
 * wrong roles, a locked store, a put stored nothing, an unclean stop, the last-error message (per thread,
 * snprintf-like), names of statuses, frees of NULL. Nothing here may crash or leak. */
#include "test_util.h" /* first: it sets the feature macros */

#include <errno.h>
#include <pthread.h>
#include <sys/stat.h>

/* The last error mentions `needle`. */
#define CHECK_MESSAGE(needle) CHECK(strstr(last_error(), (needle)) != NULL, "message %s lacks %s", last_error(), (needle))

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  CHECK(f != NULL, "fopen %s", path);
  CHECK(fputs(text, f) >= 0 && fclose(f) == 0, "writing %s", path);
}

static void *other_thread(void *arg) {
  (void)arg;
  /* Each thread has its own message: this one sees none of main's, and leaves its own. */
  char buf[64];
  CHECK(rmqha_last_error_message(buf, sizeof buf) == 0 && buf[0] == '\0', "fresh thread message %s", buf);
  CHECK_STATUS(rmqha_config_new(NULL), RMQHA_STATUS_NULL_ARGUMENT);
  CHECK_MESSAGE("out is NULL");
  return NULL;
}

static void config_errors(const char *dir) {
  rmqha_config *cfg = NULL;
  CHECK_STATUS(rmqha_config_new(NULL), RMQHA_STATUS_NULL_ARGUMENT);
  CHECK_OK(rmqha_config_new(&cfg));

  CHECK_STATUS(rmqha_config_set(NULL, "listenPort", "1"), RMQHA_STATUS_NULL_ARGUMENT);
  CHECK_MESSAGE("cfg");
  CHECK_STATUS(rmqha_config_set(cfg, NULL, "1"), RMQHA_STATUS_NULL_ARGUMENT);
  CHECK_MESSAGE("key");
  CHECK_STATUS(rmqha_config_set(cfg, "listenPort", NULL), RMQHA_STATUS_NULL_ARGUMENT);
  CHECK_MESSAGE("value");
  CHECK_STATUS(rmqha_config_set(cfg, "listenPort", "\xff\xfe"), RMQHA_STATUS_INVALID_ARGUMENT);
  CHECK_MESSAGE("UTF-8");

  /* A bad value names the key and keeps the old value. */
  CHECK_OK(rmqha_config_set(cfg, "listenPort", "10999"));
  CHECK_STATUS(rmqha_config_set(cfg, "listenPort", "port"), RMQHA_STATUS_CONFIG);
  CHECK_MESSAGE("listenPort");
  char value[16];
  size_t len = 0;
  CHECK_OK(rmqha_config_get(cfg, "listenPort", value, sizeof value, &len));
  CHECK(strcmp(value, "10999") == 0 && len == 5, "listenPort kept: %s", value);
  /* So does a value that parses but is out of range. */
  CHECK_STATUS(rmqha_config_set(cfg, "listenPort", "70000"), RMQHA_STATUS_CONFIG);
  CHECK_MESSAGE("65535");
  CHECK_OK(rmqha_config_get(cfg, "listenPort", value, sizeof value, &len));
  CHECK(strcmp(value, "10999") == 0 && len == 5, "listenPort kept after 70000: %s", value);
  CHECK_STATUS(rmqha_config_set(cfg, "brokerRole", "MASTER"), RMQHA_STATUS_CONFIG);
  CHECK_MESSAGE("brokerRole");
  CHECK_STATUS(rmqha_config_set(cfg, "flushDiskType", "SOMETIMES"), RMQHA_STATUS_CONFIG);

  /* An unknown key is reported, ignored, and the config is still usable. */
  CHECK_STATUS(rmqha_config_set(cfg, "listenPrt", "1"), RMQHA_STATUS_UNKNOWN_CONFIG_KEY);
  CHECK_MESSAGE("listenPrt");
  CHECK_STATUS(rmqha_config_get(cfg, "listenPrt", value, sizeof value, NULL), RMQHA_STATUS_UNKNOWN_CONFIG_KEY);
  CHECK_OK(rmqha_config_warnings(cfg, NULL, 0, &len));
  CHECK(len > 0, "the unknown key is among the warnings");
  CHECK_STATUS(rmqha_config_set(cfg, "listenPrt", "2"), RMQHA_STATUS_UNKNOWN_CONFIG_KEY); /* every time */
  /* A known key kept with a warning is OK: a ratio clamped as RocketMQ does, a key with no
   * effect here. The warnings say so. */
  CHECK_OK(rmqha_config_set(cfg, "diskMaxUsedSpaceRatio", "99"));
  CHECK_OK(rmqha_config_get(cfg, "diskMaxUsedSpaceRatio", value, sizeof value, NULL));
  CHECK(strcmp(value, "95") == 0, "clamped ratio: %s", value);
  CHECK_OK(rmqha_config_set(cfg, "redeleteHangedFileInterval", "60000"));
  char said[4096];
  CHECK_OK(rmqha_config_warnings(cfg, said, sizeof said, &len));
  CHECK(len < sizeof said && strstr(said, "using 95") && strstr(said, "redeleteHangedFileInterval has no effect"),
        "warnings: %s", said);
  /* An unknown key set again (its warning kept once) is named by its own warning, not by a
   * later one about a key that contains it. */
  CHECK_STATUS(rmqha_config_set(cfg, "Ratio", "1"), RMQHA_STATUS_UNKNOWN_CONFIG_KEY);
  CHECK_OK(rmqha_config_set(cfg, "diskMaxUsedSpaceRatio", "98"));
  CHECK_STATUS(rmqha_config_set(cfg, "Ratio", "1"), RMQHA_STATUS_UNKNOWN_CONFIG_KEY);
  CHECK(strstr(last_error(), "Ratio") != NULL && strstr(last_error(), "diskMaxUsedSpaceRatio") == NULL,
        "the unknown key's own warning: %s", last_error());

  /* Either spelling of a renamed key; truncated reads report the full length. */
  CHECK_OK(rmqha_config_set(cfg, "mapedFileSizeCommitLog", "123456789"));
  CHECK_OK(rmqha_config_get(cfg, "mappedFileSizeCommitLog", value, 4, &len));
  CHECK(strcmp(value, "123") == 0 && len == 9, "truncated get: %s %zu", value, len);
  CHECK_STATUS(rmqha_config_get(cfg, NULL, value, sizeof value, NULL), RMQHA_STATUS_NULL_ARGUMENT);

  /* Properties files: missing, malformed value (file and line named), unknown keys listed. */
  char path[512];
  snprintf(path, sizeof path, "%s/missing.properties", dir);
  CHECK_STATUS(rmqha_config_load_file(cfg, path), RMQHA_STATUS_CONFIG);
  CHECK_MESSAGE("missing.properties");
  snprintf(path, sizeof path, "%s/bad.properties", dir);
  write_file(path, "brokerRole=SYNC_MASTER\nslaveTimeout=soon\n");
  CHECK_STATUS(rmqha_config_load_file(cfg, path), RMQHA_STATUS_CONFIG);
  CHECK_MESSAGE("bad.properties:2");
  CHECK_MESSAGE("slaveTimeout");
  CHECK_OK(rmqha_config_get(cfg, "brokerRole", value, sizeof value, NULL));
  CHECK(strcmp(value, "ASYNC_MASTER") == 0, "a failed load changes nothing: %s", value);
  snprintf(path, sizeof path, "%s/good.properties", dir);
  write_file(path, "# a RocketMQ file\nbrokerRole = SYNC_MASTER\nsendMessageThreadPoolNums=16\nnoSuchKey=1\n");
  CHECK_OK(rmqha_config_load_file(cfg, path));
  CHECK_OK(rmqha_config_get(cfg, "brokerRole", value, sizeof value, NULL));
  CHECK(strcmp(value, "SYNC_MASTER") == 0, "loaded role %s", value);
  char warnings[512];
  CHECK_OK(rmqha_config_warnings(cfg, warnings, sizeof warnings, NULL));
  CHECK(strstr(warnings, "sendMessageThreadPoolNums") != NULL && strstr(warnings, "noSuchKey") != NULL, "warnings: %s", warnings);
  CHECK_STATUS(rmqha_config_load_file(cfg, NULL), RMQHA_STATUS_NULL_ARGUMENT);
  /* A value with a NUL byte (\u0000 in the file) reads back cut at it, with strlen's length. */
  snprintf(path, sizeof path, "%s/nul.properties", dir);
  write_file(path, "brokerClusterName=ab\\u0000cd\nfo\\u0000o=1\n");
  CHECK_OK(rmqha_config_load_file(cfg, path));
  CHECK_OK(rmqha_config_get(cfg, "brokerClusterName", value, sizeof value, &len));
  CHECK(strcmp(value, "ab") == 0 && len == 2, "a value with a NUL: %s, length %zu", value, len);
  /* A NULL buffer with a length is a mistake, not a question about the length. */
  CHECK_STATUS(rmqha_config_get(cfg, "brokerClusterName", NULL, 8, &len), RMQHA_STATUS_NULL_ARGUMENT);
  CHECK_MESSAGE("buf is NULL");
  CHECK_STATUS(rmqha_config_warnings(cfg, NULL, 8, NULL), RMQHA_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(rmqha_config_get(cfg, "brokerClusterName", value, (size_t)-1, &len), RMQHA_STATUS_INVALID_ARGUMENT);
  /* Other text shows a NUL as \u0000, hiding nothing after it: here a warning's key. */
  CHECK_OK(rmqha_config_warnings(cfg, warnings, sizeof warnings, &len));
  CHECK(strstr(warnings, "fo\\u0000o") != NULL && strlen(warnings) == len, "warnings: %s", warnings);

  rmqha_config_free(cfg);
  rmqha_config_free(NULL);
}

/* Every broker function: NULL handle, NULL out, invalid arguments; on a live SYNC_MASTER with
 * maxMessageSize 1024 and no slave. */
static void broker_errors(rmqha_broker *master) {
  int64_t v;
  uint16_t port;
  CHECK_STATUS(rmqha_max_offset(NULL, &v), RMQHA_STATUS_NULL_ARGUMENT);
  CHECK_MESSAGE("broker is NULL");
  CHECK_STATUS(rmqha_max_offset(master, NULL), RMQHA_STATUS_NULL_ARGUMENT);
  CHECK_MESSAGE("out is NULL");
  CHECK_STATUS(rmqha_min_offset(NULL, &v), RMQHA_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(rmqha_flushed_offset(master, NULL), RMQHA_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(rmqha_slave_ack_offset(NULL, &v), RMQHA_STATUS_NULL_ARGUMENT);
  CHECK_OK(rmqha_slave_ack_offset(master, &v));
  CHECK(v == -1, "no slave acked yet: %lld", (long long)v);
  CHECK_STATUS(rmqha_listen_port(NULL, &port), RMQHA_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(rmqha_ha_port(master, NULL), RMQHA_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(rmqha_queue_min_offset(master, NULL, 0, &v), RMQHA_STATUS_NULL_ARGUMENT);
  CHECK_MESSAGE("topic");
  CHECK_STATUS(rmqha_queue_max_offset(master, "T", 0, NULL), RMQHA_STATUS_NULL_ARGUMENT);
  CHECK_OK(rmqha_queue_max_offset(master, "NoSuchTopic", 3, &v));
  CHECK(v == 0, "unknown queue max %lld", (long long)v);
  CHECK_STATUS(rmqha_queue_offset_by_time(master, "T", 0, 0, 2, &v), RMQHA_STATUS_INVALID_ARGUMENT);
  CHECK_MESSAGE("boundary 2");
  CHECK_STATUS(rmqha_queue_offset_by_time(master, "T", 0, 0, RMQHA_TIME_BOUNDARY_LOWER, NULL),
               RMQHA_STATUS_NULL_ARGUMENT);
  CHECK_OK(rmqha_queue_offset_by_time(master, "NoSuchTopic", 3, 0, RMQHA_TIME_BOUNDARY_UPPER, &v));
  CHECK(v == 0, "unknown queue by time %lld", (long long)v);
  CHECK_STATUS(rmqha_consumer_offset(master, NULL, "T", 0, &v), RMQHA_STATUS_NULL_ARGUMENT);
  CHECK_MESSAGE("group");
  CHECK_STATUS(rmqha_commit_consumer_offset(master, "g", "T", 0, -5), RMQHA_STATUS_INVALID_ARGUMENT);
  CHECK_MESSAGE("-5");
  CHECK_STATUS(rmqha_offsets(NULL, NULL), RMQHA_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(rmqha_slave_info(master, 0, NULL), RMQHA_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(rmqha_shutdown(NULL), RMQHA_STATUS_NULL_ARGUMENT);

  rmqha_put_result_t r;
  const uint8_t *body = (const uint8_t *)"hello";
  CHECK_STATUS(rmqha_put_message_sync(NULL, "T", body, 5, NULL, NULL, &r), RMQHA_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(rmqha_put_message_sync(master, NULL, body, 5, NULL, NULL, &r), RMQHA_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(rmqha_put_message_sync(master, "T", body, 5, NULL, NULL, NULL), RMQHA_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(rmqha_put_message_sync(master, "T", NULL, 5, NULL, NULL, &r), RMQHA_STATUS_NULL_ARGUMENT);
  CHECK_MESSAGE("body");
  CHECK_STATUS(rmqha_put_message_sync(master, "T", body, 5, "\xc3", NULL, &r), RMQHA_STATUS_INVALID_ARGUMENT);
  CHECK_MESSAGE("tags");
  CHECK_STATUS(rmqha_put_message_sync_to_queue(master, "T", -1, body, 5, NULL, NULL, &r),
               RMQHA_STATUS_INVALID_ARGUMENT);
  CHECK_MESSAGE("queue_id");
  /* A length no buffer can have (a failed read()'s -1 as size_t) is refused, not read. */
  CHECK_STATUS(rmqha_put_message_sync(master, "T", body, SIZE_MAX, NULL, NULL, &r), RMQHA_STATUS_INVALID_ARGUMENT);
  CHECK_MESSAGE("body length");
  /* Stored nothing: an error status, and the reason in RocketMQ's terms in the result. */
  static uint8_t big[2048];
  CHECK_STATUS(rmqha_put_message_sync(master, "T", big, sizeof big, NULL, NULL, &r), RMQHA_STATUS_PUT_FAILED);
  CHECK(r.status == RMQHA_PUT_STATUS_MESSAGE_ILLEGAL && r.phy_offset == -1 && r.msg_id[0] == '\0' && r.size == 0,
        "too large: %s", rmqha_put_status_name(r.status));
  /* An empty body with a NULL pointer is fine. */
  CHECK_OK(rmqha_put_message_sync(master, "T", NULL, 0, NULL, NULL, &r));
  CHECK(r.status == RMQHA_PUT_STATUS_SLAVE_NOT_AVAILABLE && r.queue_offset == 1, "empty body: %s %lld",
        rmqha_put_status_name(r.status), (long long)r.queue_offset);
  /* Properties: a NULL array with a count, a NULL key, separator bytes, a count no message
     can hold, a delay that is no level. */
  CHECK_STATUS(rmqha_put_message_sync_with_properties(master, "T", 0, body, 5, NULL, NULL, NULL, 1, &r),
               RMQHA_STATUS_NULL_ARGUMENT);
  CHECK_MESSAGE("properties is NULL");
  rmqha_property_t no_key[] = {{NULL, "v"}};
  CHECK_STATUS(rmqha_put_message_sync_with_properties(master, "T", 0, body, 5, NULL, NULL, no_key, 1, &r),
               RMQHA_STATUS_NULL_ARGUMENT);
  CHECK_MESSAGE("properties[0].key");
  rmqha_property_t separator[] = {{"k", "a\x01" "b"}};
  CHECK_STATUS(rmqha_put_message_sync_with_properties(master, "T", 0, body, 5, NULL, NULL, separator, 1, &r),
               RMQHA_STATUS_PUT_FAILED);
  CHECK(r.status == RMQHA_PUT_STATUS_MESSAGE_ILLEGAL, "separator: %s", rmqha_put_status_name(r.status));
  CHECK_STATUS(rmqha_put_message_sync_with_properties(master, "T", 0, body, 5, NULL, NULL, separator, SIZE_MAX, &r),
               RMQHA_STATUS_INVALID_ARGUMENT);
  CHECK_MESSAGE("property_count");
  rmqha_property_t no_level[] = {{"DELAY", "soon"}};
  CHECK_STATUS(rmqha_put_message_sync_with_properties(master, "T", 0, body, 5, NULL, NULL, no_level, 1, &r),
               RMQHA_STATUS_PUT_FAILED);
  CHECK(r.status == RMQHA_PUT_STATUS_MESSAGE_ILLEGAL, "no level: %s", rmqha_put_status_name(r.status));
  CHECK_MESSAGE("soon");

  /* Every read sets *out to NULL on failure, so freeing it then is always safe. */
  rmqha_get_result_t *got = (rmqha_get_result_t *)1;
  CHECK_STATUS(rmqha_get_messages(master, "T", 0, 0, 0, &got), RMQHA_STATUS_INVALID_ARGUMENT);
  CHECK_MESSAGE("max_msgs");
  CHECK(got == NULL, "NULL result on failure");
  CHECK_STATUS(rmqha_get_messages(master, "T", 0, 0, 1, NULL), RMQHA_STATUS_NULL_ARGUMENT);
  got = (rmqha_get_result_t *)1;
  CHECK_STATUS(rmqha_get_messages(NULL, "T", 0, 0, 1, &got), RMQHA_STATUS_NULL_ARGUMENT);
  CHECK(got == NULL, "NULL result on failure");
  got = (rmqha_get_result_t *)1;
  CHECK_STATUS(rmqha_get_messages(master, NULL, 0, 0, 1, &got), RMQHA_STATUS_NULL_ARGUMENT);
  CHECK(got == NULL, "NULL result on failure");
  CHECK_OK(rmqha_get_messages(master, "NoSuchTopic", 0, 0, 1, &got));
  CHECK(got->status == RMQHA_GET_STATUS_NO_MATCHED_LOGIC_QUEUE && got->message_count == 0, "%s",
        rmqha_get_status_name(got->status));
  rmqha_get_result_free(got);
  got = (rmqha_get_result_t *)1; /* must be overwritten with NULL */
  CHECK_STATUS(rmqha_message_by_id(master, "0000000000000000000000000000FFFF", &got), RMQHA_STATUS_NOT_FOUND);
  CHECK(got == NULL, "NULL result when not found");
  CHECK_STATUS(rmqha_message_by_id(master, "not hex", &got), RMQHA_STATUS_NOT_FOUND);
  CHECK_STATUS(rmqha_message_by_id(master, NULL, &got), RMQHA_STATUS_NULL_ARGUMENT);
  got = (rmqha_get_result_t *)1;
  CHECK_STATUS(rmqha_query_by_key(master, "T", NULL, 1, &got), RMQHA_STATUS_NULL_ARGUMENT);
  CHECK(got == NULL, "NULL result on failure");
}

static void start_errors(const char *dir) {
  rmqha_broker *b = NULL;
  CHECK_STATUS(rmqha_start_master(NULL, &b), RMQHA_STATUS_NULL_ARGUMENT);
  rmqha_config *master_cfg = test_config(dir, "SYNC_MASTER");
  CHECK_OK(rmqha_config_set(master_cfg, "maxMessageSize", "1024"));
  CHECK_STATUS(rmqha_start_master(master_cfg, NULL), RMQHA_STATUS_NULL_ARGUMENT);

  /* Wrong roles, both ways. */
  CHECK_STATUS(rmqha_start_slave(master_cfg, &b), RMQHA_STATUS_WRONG_ROLE);
  CHECK_MESSAGE("SLAVE");
  CHECK(b == NULL, "no handle on failure");
  char slave_dir[512];
  snprintf(slave_dir, sizeof slave_dir, "%s/slave", dir);
  rmqha_config *slave_cfg = test_config(slave_dir, "SLAVE");
  /* A failed start clears the out-pointer, even one holding a stale value. */
  b = (rmqha_broker *)(uintptr_t)0x1;
  CHECK_STATUS(rmqha_start_master(slave_cfg, &b), RMQHA_STATUS_WRONG_ROLE);
  CHECK(b == NULL, "a failed start leaves NULL in *out");
  /* A slave needs its master's address. */
  CHECK_STATUS(rmqha_start_slave(slave_cfg, &b), RMQHA_STATUS_CONFIG);
  CHECK_MESSAGE("haMasterAddress");

  /* A store that cannot be made (its root under a regular file) is an I/O error naming it. */
  char blocker[512], under[600];
  snprintf(blocker, sizeof blocker, "%s/a-file", dir);
  write_file(blocker, "not a directory");
  snprintf(under, sizeof under, "%s/store", blocker);
  rmqha_config *blocked_cfg = test_config(under, "ASYNC_MASTER");
  CHECK_STATUS(rmqha_start_master(blocked_cfg, &b), RMQHA_STATUS_IO);
  CHECK_MESSAGE(under);
  CHECK(b == NULL, "no handle on failure");
  rmqha_config_free(blocked_cfg);

  /* A store directory is locked by the broker using it. */
  rmqha_broker *master = NULL;
  CHECK_OK(rmqha_start_master(master_cfg, &master));
  CHECK_STATUS(rmqha_start_master(master_cfg, &b), RMQHA_STATUS_STORE);
  CHECK_MESSAGE("locked");
  CHECK(b == NULL, "no second broker on a locked store");

  /* A slave refuses puts; a body over maxMessageSize stores nothing. */
  CHECK_OK(rmqha_config_set(slave_cfg, "haMasterAddress", "127.0.0.1:1")); /* nobody there */
  rmqha_broker *slave = NULL;
  CHECK_OK(rmqha_start_slave(slave_cfg, &slave));
  rmqha_put_result_t r;
  memset(&r, 0xAB, sizeof r);
  CHECK_STATUS(rmqha_put_message_sync(slave, "T", (const uint8_t *)"x", 1, NULL, NULL, &r), RMQHA_STATUS_PUT_FAILED);
  CHECK_MESSAGE("SLAVE");
  CHECK(r.status == RMQHA_PUT_STATUS_SERVICE_NOT_AVAILABLE && r.phy_offset == -1, "a slave's refusal is SERVICE_NOT_AVAILABLE, as in every binding");
  int64_t slave_max = 1;
  CHECK_OK(rmqha_max_offset(slave, &slave_max));
  CHECK(slave_max == 0, "a refused put stores nothing on the slave");
  rmqha_offsets_t so;
  CHECK_OK(rmqha_offsets(slave, &so));
  CHECK(so.role == RMQHA_ROLE_SLAVE && strcmp(so.master_address, "127.0.0.1:1") == 0, "slave offsets");
  rmqha_slave_info_t info;
  CHECK_STATUS(rmqha_slave_info(slave, 0, &info), RMQHA_STATUS_NOT_FOUND);
  CHECK_OK(rmqha_shutdown(slave));
  rmqha_broker_free(slave);

  /* No slave connected: SYNC_MASTER stores and says SLAVE_NOT_AVAILABLE, a result, not an error. */
  CHECK_OK(rmqha_put_message_sync(master, "T", (const uint8_t *)"x", 1, "", "", &r));
  CHECK(r.status == RMQHA_PUT_STATUS_SLAVE_NOT_AVAILABLE && r.phy_offset == 0 && r.msg_id[0] != '\0', "%s",
        rmqha_put_status_name(r.status));
  CHECK_STATUS(rmqha_slave_info(master, 0, &info), RMQHA_STATUS_NOT_FOUND);

  rmqha_config_free(slave_cfg);
  rmqha_config_free(master_cfg);
  broker_errors(master);
  rmqha_broker_free(master); /* shuts down too */
}

/* A stop that could not persist what it should reports it (and still stops): the delay
 * offsets' temporary file cannot be made, a directory holds its name. */
static void unclean_stop(const char *dir) {
  char root[512], blocker[600];
  snprintf(root, sizeof root, "%s/unclean", dir);
  rmqha_config *cfg = test_config(root, "ASYNC_MASTER");
  rmqha_broker *b = NULL;
  CHECK_OK(rmqha_start_master(cfg, &b));
  snprintf(blocker, sizeof blocker, "%s/config", root);
  CHECK(mkdir(blocker, 0755) == 0 || errno == EEXIST, "mkdir %s", blocker);
  snprintf(blocker, sizeof blocker, "%s/config/delayOffset.json.tmp", root);
  CHECK(mkdir(blocker, 0755) == 0, "mkdir %s", blocker);
  CHECK_STATUS(rmqha_shutdown(b), RMQHA_STATUS_STORE);
  CHECK_MESSAGE("stopped uncleanly");
  CHECK_MESSAGE("config tables not persisted");
  /* Stopped all the same; a later call answers the same. */
  rmqha_put_result_t r;
  CHECK_STATUS(rmqha_put_message_sync(b, "T", (const uint8_t *)"x", 1, NULL, NULL, &r), RMQHA_STATUS_PUT_FAILED);
  CHECK(r.status == RMQHA_PUT_STATUS_SERVICE_NOT_AVAILABLE, "%s", rmqha_put_status_name(r.status));
  CHECK_STATUS(rmqha_shutdown(b), RMQHA_STATUS_STORE);
  rmqha_broker_free(b);
  rmqha_config_free(cfg);
}

int main(void) {
  char *dir = make_dir("rmqha-c-errors");
  char buf[8];
  CHECK(rmqha_last_error_message(buf, sizeof buf) == 0 && buf[0] == '\0', "no error yet");

  config_errors(dir);
  start_errors(dir);
  unclean_stop(dir);

  /* The last-error message: snprintf-like truncation, per thread. */
  CHECK_STATUS(rmqha_config_set(NULL, "k", "v"), RMQHA_STATUS_NULL_ARGUMENT);
  size_t full = rmqha_last_error_message(NULL, 0);
  CHECK(full == strlen("cfg is NULL"), "length %zu", full);
  CHECK(rmqha_last_error_message(buf, 4) == full && strcmp(buf, "cfg") == 0, "truncated: %s", buf);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, other_thread, NULL) == 0, "pthread_create");
  CHECK(pthread_join(t, NULL) == 0, "pthread_join");
  CHECK(strcmp(last_error(), "cfg is NULL") == 0, "main's message survived: %s", last_error());

  /* Names, and frees of NULL. */
  CHECK(strcmp(rmqha_status_name(RMQHA_STATUS_WRONG_ROLE), "RMQHA_STATUS_WRONG_ROLE") == 0, "status name");
  CHECK(strcmp(rmqha_status_name(12345), "RMQHA_STATUS_UNKNOWN") == 0, "unknown status name");
  CHECK(strcmp(rmqha_put_status_name(RMQHA_PUT_STATUS_FLUSH_SLAVE_TIMEOUT), "FLUSH_SLAVE_TIMEOUT") == 0, "put name");
  CHECK(strcmp(rmqha_get_status_name(RMQHA_GET_STATUS_NO_MATCHED_LOGIC_QUEUE), "NO_MATCHED_LOGIC_QUEUE") == 0, "get");
  CHECK(strcmp(rmqha_get_status_name(99), "UNKNOWN") == 0, "unknown get status name");
  rmqha_broker_free(NULL);
  rmqha_get_result_free(NULL);

  remove_dir(dir);
  printf("errors: all error paths answered as documented\n");
  return 0;
}
