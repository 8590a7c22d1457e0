//! No two modules of the crate import each other in a circle, at any level of its module
//! tree (see `efr_layout`).

#[test]
fn no_module_imports_another_that_imports_it_back() {
    efr_layout::assert_no_import_circle(concat!(env!("CARGO_MANIFEST_DIR"), "/src"));
}
