fn main() {
    std::process::exit(goodput_cli::main());
}
