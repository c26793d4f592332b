//! Inputs shared by the unit tests of several reports.

use reqcost_record::{Profile, RunRecord};

/// A run without phases whose profile has 10 samples: 6 in memcpy called from two places (4
/// through an inlined frame), 3 in the kernel under write, 1 in main.
pub fn profile_run() -> RunRecord {
    RunRecord::from_json(include_str!(
        "../../analysis/tests/fixtures/profile-run.json"
    ))
    .expect("the fixture is a run record")
}

pub fn sample_profile() -> Profile {
    profile_run().profile.expect("the fixture has a profile")
}
