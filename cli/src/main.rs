//! `rmqha`: run a broker from a RocketMQ-style properties file, run the replication demo,
//! ask a running broker for its status, and run the benchmarks.

mod bench;
mod broker_cmd;
mod client_cmd;
mod config_cmd;
mod demo;
mod ha_bench;
mod metrics_http;
mod progress;
mod remote_bench;
mod reset_offset;
mod stats_cmd;
mod status;
mod truncate_cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "rmqha", version, about = "RocketMQ-compatible replicated commit log")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a broker until SIGINT, SIGTERM or SIGHUP (unless ignored), then shut down gracefully.
    Broker(broker_cmd::BrokerArgs),
    /// A SYNC_MASTER and a SLAVE on temporary directories: put, replicate, verify, report.
    Demo(demo::DemoArgs),
    /// Print a running broker's role, offsets and slaves.
    Status(status::StatusArgs),
    /// Print a consumer group's offsets and lag on a running broker, queue by queue.
    Progress(progress::ProgressArgs),
    /// Print each topic's put rate and messages in over the last day, and each consuming
    /// group's lag, pull rate and messages out (what `mqadmin statsAll` prints).
    Stats(stats_cmd::StatsArgs),
    /// Move a consumer group's offsets on a topic to a store time (and tell its consumers).
    ResetOffset(reset_offset::ResetOffsetArgs),
    /// Print a running broker's settings, or change one at run time (`--set
    /// brokerPermission=4` drains its writes; the broker keeps it in its properties file).
    Config(config_cmd::ConfigArgs),
    /// Send a message (or one per line) to a running broker over RocketMQ's protocol.
    Put(client_cmd::PutArgs),
    /// Pull messages of one queue from a running broker over RocketMQ's protocol.
    Get(client_cmd::GetArgs),
    /// Cut a stopped broker's store back to a record start (a slave whose log diverged from
    /// its master's: the error names where).
    Truncate(truncate_cmd::TruncateArgs),
    /// Benchmarks (results in BENCHMARKS.md).
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Store: put throughput (ASYNC and SYNC flush), dispatch and read rates, with baselines.
    Store(bench::store::StoreBenchArgs),
    /// Replication: catch-up, SYNC vs ASYNC master throughput and latency, cost of slaves.
    Ha(ha_bench::HaBenchArgs),
    /// Remote produce over the remoting protocol vs embedded puts, 64 threads, 128-byte bodies.
    Remote(remote_bench::RemoteBenchArgs),
    /// Many queues: the first unit of each of N new queues, then a crash and the reopen.
    Queues(bench::queues::QueuesBenchArgs),
    /// Topic creation: N topics created one at a time, each durable before it returns.
    Topics(bench::topics::TopicsBenchArgs),
    /// Consumer filters: a queue read whole with no filter, a tag, and SQL92 expressions.
    Filter(bench::filter::FilterBenchArgs),
}

fn init_logging(default: &str) {
    rmqha_core::logging::init_stderr(rmqha_core::logging::env_filter(default));
}

/// For the commands that print to a pipe (`rmqha status | head`): a closed pipe ends the
/// process quietly, as it does `cat`, instead of Rust's default (the signal ignored, and a
/// panic at the next `println!`). Their sockets send with MSG_NOSIGNAL.
fn die_on_closed_stdout() {
    // SAFETY: sets this process's SIGPIPE disposition before any thread starts.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if matches!(
        cli.command,
        Command::Status(_)
            | Command::Progress(_)
            | Command::Stats(_)
            | Command::ResetOffset(_)
            | Command::Config(_)
            | Command::Get(_)
            | Command::Put(_)
            | Command::Truncate(_)
    ) {
        die_on_closed_stdout();
    }
    let result = match cli.command {
        Command::Broker(a) => {
            init_logging("info");
            broker_cmd::run(a)
        }
        Command::Demo(a) => {
            init_logging("warn");
            demo::run(a)
        }
        Command::Status(a) => {
            init_logging("warn");
            status::run(a)
        }
        Command::Progress(a) => {
            init_logging("warn");
            progress::run(a)
        }
        Command::Stats(a) => {
            init_logging("warn");
            stats_cmd::run(a)
        }
        Command::ResetOffset(a) => {
            init_logging("warn");
            reset_offset::run(a)
        }
        Command::Config(a) => {
            init_logging("warn");
            config_cmd::run(a)
        }
        Command::Bench(BenchCommand::Store(a)) => {
            init_logging("warn");
            bench::store::run_store(&a)
        }
        Command::Truncate(a) => {
            init_logging("warn");
            truncate_cmd::run(a)
        }
        Command::Put(a) => {
            init_logging("warn");
            client_cmd::run_put(a)
        }
        Command::Get(a) => {
            init_logging("warn");
            client_cmd::run_get(a)
        }
        Command::Bench(BenchCommand::Remote(a)) => {
            init_logging("warn");
            remote_bench::run(a)
        }
        Command::Bench(BenchCommand::Queues(a)) => {
            init_logging("warn");
            bench::queues::run(&a)
        }
        Command::Bench(BenchCommand::Topics(a)) => {
            init_logging("warn");
            bench::topics::run(&a)
        }
        Command::Bench(BenchCommand::Filter(a)) => {
            init_logging("warn");
            bench::filter::run(&a)
        }
        Command::Bench(BenchCommand::Ha(a)) => {
            init_logging("warn");
            ha_bench::run(a)
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rmqha: {e}");
            ExitCode::FAILURE
        }
    }
}
