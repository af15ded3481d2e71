fn main() {
    eprintln!("rmqha: not built yet");
    std::process::exit(2);
}
