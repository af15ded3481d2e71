//! `rmqha bench`: benchmarks are programs, not timed assertions. Each one measures its own
//! baselines in the same run (what the hardware does without rmqha) and prints the ratios
//! its targets are stated in, so results from different machines can be compared.

pub mod store;
