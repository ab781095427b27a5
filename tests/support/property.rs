//! The property tests' runner settings.

use proptest::test_runner::{Config, RngSeed};

/// A proptest config with the suite's defaults (a fixed seed, so a failure reproduces;
/// no failure files), each overridable by its `PROPTEST_*` variable.
pub fn config(default_cases: u32, seed: u64, max_shrink_iters: u32) -> Config {
    // Config::default() reads PROPTEST_* from the environment.
    let mut config = Config::default();
    if !env_set("PROPTEST_CASES") {
        config.cases = default_cases;
    }
    if !env_set("PROPTEST_RNG_SEED") {
        config.rng_seed = RngSeed::Fixed(seed);
    }
    if !env_set("PROPTEST_MAX_SHRINK_ITERS") {
        config.max_shrink_iters = max_shrink_iters;
    }
    config.failure_persistence = None;
    config
}

fn env_set(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| !v.is_empty())
}
