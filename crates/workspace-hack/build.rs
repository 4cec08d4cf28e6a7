// Cargo builds [build-dependencies] only for a package with a build script.
fn main() {}
