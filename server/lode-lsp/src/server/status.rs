//! `lode/status`: what the index holds and how fresh it is (`Engine::status`), with the
//! workspace's folders.

use super::*;

impl Backend {
    pub(super) async fn lode_status(&self, _: Value) -> Result<Value> {
        let state = self.state().await?;
        let folders = self.folders.lock().clone().unwrap_or_default();
        blocking(move || {
            let mut v = state.status()?;
            v["vaults"] = json!(folders);
            Ok(v)
        })
        .await
    }
}
