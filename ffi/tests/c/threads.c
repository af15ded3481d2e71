/* Several pthreads putting concurrently through one broker handle (a SYNC_MASTER with a
 * slave): every put is PUT_OK, each thread's queue holds exactly its messages with queue
 * offsets 0..N-1, the records tile the CommitLog without gap or overlap, and the slave ends
 * with the same bytes and queues.
 *
 * Usage: threads [THREADS [PUTS_PER_THREAD]]   (default 4 x 150) */
#include "test_util.h" /* first: it sets the feature macros */

#include <pthread.h>

#define TOPIC "CThreads"
#define MAX_THREADS 16

typedef struct {
  const rmqha_broker *master;
  int id;
  int puts;
  rmqha_put_result_t *results;
  int ok;
} worker;

static void *put_loop(void *p) {
  worker *w = p;
  for (int i = 0; i < w->puts; i++) {
    char body[96], keys[32];
    int len = snprintf(body, sizeof body, "thread %d message %d %040d", w->id, i, i);
    snprintf(keys, sizeof keys, "t%d-%d", w->id, i);
    rmqha_put_result_t *r = &w->results[i];
    /* Each thread its own queue, so the queue offsets check the count per thread. */
    rmqha_status s = rmqha_put_message_sync_to_queue(w->master, TOPIC, w->id, (const uint8_t *)body, (size_t)len,
                                                     "threads", keys, r);
    if (s != RMQHA_STATUS_OK) {
      fprintf(stderr, "thread %d put %d: %s: %s\n", w->id, i, rmqha_status_name(s), last_error());
      continue;
    }
    if (r->status == RMQHA_PUT_STATUS_PUT_OK)
      w->ok++;
    else
      fprintf(stderr, "thread %d put %d: %s\n", w->id, i, rmqha_put_status_name(r->status));
  }
  return NULL;
}

static int by_phy_offset(const void *a, const void *b) {
  const rmqha_put_result_t *x = a, *y = b;
  return (x->phy_offset > y->phy_offset) - (x->phy_offset < y->phy_offset);
}

typedef struct {
  const rmqha_broker *broker;
  int threads;
  int64_t per_queue;
  int64_t max_offset;
} caught_up;

/* The broker holds `max_offset` bytes and has dispatched them into its queues (dispatch is
 * asynchronous on masters and slaves alike). */
static bool queues_caught_up(void *p) {
  caught_up *c = p;
  int64_t v = -1;
  if (rmqha_max_offset(c->broker, &v) != RMQHA_STATUS_OK || v != c->max_offset) return false;
  for (int q = 0; q < c->threads; q++)
    if (rmqha_queue_max_offset(c->broker, TOPIC, q, &v) != RMQHA_STATUS_OK || v != c->per_queue) return false;
  return true;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 4;
  int puts = argc > 2 ? atoi(argv[2]) : 150;
  CHECK(threads >= 2 && threads <= MAX_THREADS && puts >= 1, "threads %d, puts %d", threads, puts);

  char *master_dir = make_dir("rmqha-c-threads-master");
  char *slave_dir = make_dir("rmqha-c-threads-slave");
  rmqha_config *cfg = test_config(master_dir, "SYNC_MASTER");
  rmqha_broker *master = NULL;
  CHECK_OK(rmqha_start_master(cfg, &master));
  rmqha_config_free(cfg);
  cfg = slave_config(slave_dir, master);
  rmqha_broker *slave = NULL;
  CHECK_OK(rmqha_start_slave(cfg, &slave));
  rmqha_config_free(cfg);
  wait_for_slave(master);

  worker workers[MAX_THREADS];
  pthread_t tids[MAX_THREADS];
  rmqha_put_result_t *all = calloc((size_t)(threads * puts), sizeof *all);
  CHECK(all != NULL, "calloc");
  double t0 = now_ms();
  for (int t = 0; t < threads; t++) {
    workers[t] = (worker){master, t, puts, all + (size_t)t * puts, 0};
    CHECK(pthread_create(&tids[t], NULL, put_loop, &workers[t]) == 0, "pthread_create");
  }
  for (int t = 0; t < threads; t++) CHECK(pthread_join(tids[t], NULL) == 0, "pthread_join");
  double elapsed = now_ms() - t0;

  /* Every put PUT_OK; each queue holds its thread's messages at offsets 0..puts-1 in order. */
  for (int t = 0; t < threads; t++) {
    CHECK(workers[t].ok == puts, "thread %d: %d of %d PUT_OK", t, workers[t].ok, puts);
    for (int i = 0; i < puts; i++) {
      const rmqha_put_result_t *r = &workers[t].results[i];
      CHECK(r->queue_id == t && r->queue_offset == i, "thread %d put %d at queue %d offset %lld", t, i, r->queue_id,
            (long long)r->queue_offset);
    }
  }
  /* The records tile the CommitLog: sorted by offset, each starts where the previous ended (the
   * 1 MiB first file is not filled, so there is no end-of-file filler). */
  int total = threads * puts;
  qsort(all, (size_t)total, sizeof *all, by_phy_offset);
  CHECK(all[0].phy_offset == 0, "first record at %lld", (long long)all[0].phy_offset);
  for (int k = 1; k < total; k++)
    CHECK(all[k].phy_offset == all[k - 1].phy_offset + all[k - 1].size, "gap or overlap at record %d", k);
  int64_t end = all[total - 1].phy_offset + all[total - 1].size;
  int64_t v = 0;
  CHECK_OK(rmqha_max_offset(master, &v));
  CHECK(v == end, "master max offset %lld, records end at %lld", (long long)v, (long long)end);
  CHECK_OK(rmqha_slave_ack_offset(master, &v));
  CHECK(v == end, "master's slave ack offset %lld", (long long)v);
  caught_up on_master = {master, threads, puts, end};
  CHECK(wait_until(queues_caught_up, &on_master, 10000), "the master's queues did not reach %d each", puts);

  /* The slave has every byte (PUT_OK promised it) and dispatches the same queues. */
  CHECK_OK(rmqha_max_offset(slave, &v));
  CHECK(v == end, "slave max offset %lld", (long long)v);
  caught_up on_slave = {slave, threads, puts, end};
  CHECK(wait_until(queues_caught_up, &on_slave, 10000), "the slave's queues did not catch up");

  CHECK_OK(rmqha_shutdown(slave));
  CHECK_OK(rmqha_shutdown(master));
  rmqha_broker_free(slave);
  rmqha_broker_free(master);
  free(all);
  remove_dir(master_dir);
  remove_dir(slave_dir);
  printf("threads: %d threads x %d puts, all PUT_OK, %.0f puts/s\n", threads, puts, total / (elapsed / 1000));
  return 0;
}
