//! Prints the import circles of each source dir given, for a reader deciding a crate's layout.
fn main() {
    for d in std::env::args().skip(1) {
        match efr_layout::circles_of_dir(std::path::Path::new(&d)) {
            Ok(v) => {
                println!("== {d}: {}", v.len());
                for (root, c) in v {
                    println!(
                        "  {}: under {:?}: {:?}",
                        root.display(),
                        c.parent,
                        c.members
                    );
                }
            }
            Err(e) => println!("== {d}: error {e}"),
        }
    }
}
