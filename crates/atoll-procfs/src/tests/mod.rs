//! Tests over fake trees and, where the kernel allows, the real one.

mod fake_proc;
mod real;
