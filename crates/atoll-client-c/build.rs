//! Gives the shared library a soname with the major version
//! (`libatoll_client.so.0`): programs linked against it record that name,
//! and an install (crates/atoll-client-c/install.sh, the .deb) provides it
//! as a symlink to `libatoll_client.so.MAJOR.MINOR.PATCH`.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_else(|_| "0".into());
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libatoll_client.so.{major}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
