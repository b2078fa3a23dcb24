//! Fault injection for the tests that prove lode's isolation and recovery (debug builds only):
//! `LODE_FAULT=ask,scan,…` names the points that fail. Release builds never read it.

/// Whether a debug build's `LODE_FAULT` names `point`: a failure to simulate (not a panic),
/// e.g. `watch` (the file watcher cannot start).
pub fn fault_set(point: &str) -> bool {
    cfg!(debug_assertions) && std::env::var("LODE_FAULT").is_ok_and(|spec| spec.split(',').any(|p| p.trim() == point))
}

/// In a debug build whose `LODE_FAULT` names `point`, panics the first time `point` is reached.
pub fn fault(point: &str) {
    if !cfg!(debug_assertions) {
        return;
    }
    static FIRED: parking_lot::Mutex<Vec<String>> = parking_lot::Mutex::new(Vec::new());
    let Ok(spec) = std::env::var("LODE_FAULT") else { return };
    if spec.split(',').any(|p| p.trim() == point) {
        let mut fired = FIRED.lock();
        if !fired.iter().any(|f| f == point) {
            fired.push(point.to_owned());
            drop(fired);
            panic!("injected fault at {point}");
        }
    }
}
