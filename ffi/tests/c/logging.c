/* What the library logs reaches this process's stderr: a master started from a config that
 * still names a master to follow (a slave's file promoted by hand) warns that it ignores it.
 * The Rust side of the test reads stderr; RMQHA_LOG=off must silence it. */
#include "test_util.h"

int main(void) {
  char *dir = make_dir("rmqha-c-log");
  rmqha_config *cfg = test_config(dir, "ASYNC_MASTER");
  CHECK_OK(rmqha_config_set(cfg, "haMasterAddress", "127.0.0.1:1"));
  rmqha_broker *master = NULL;
  CHECK_OK(rmqha_start_master(cfg, &master));
  CHECK_OK(rmqha_shutdown(master));
  rmqha_broker_free(master);
  rmqha_config_free(cfg);
  remove_dir(dir);
  printf("done\n");
  return 0;
}
