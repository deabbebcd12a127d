//! Which API key created each resource, for keys' `max_resources`: `resource_owners` (resource →
//! key name) and `key_resources` (key name → how many it has, a big-endian u64), written together
//! in one transaction when a key first writes to a resource, and given back when the resource is
//! deleted.

use sled::Transactional;

use super::{Inner, StoreError, abort, engine, transaction};
use crate::domain::ResourceAllowance;

fn count_of(bytes: Option<sled::IVec>) -> u64 {
    bytes.and_then(|bytes| bytes.as_ref().try_into().ok()).map_or(0, u64::from_be_bytes)
}

impl Inner {
    pub(super) fn claim_resource(
        &self,
        allowance: &ResourceAllowance,
        resource_id: &str,
    ) -> Result<(), StoreError> {
        // Most writes go to a resource already counted: one read, no transaction.
        if self.resource_owners.get(resource_id).map_err(engine)?.is_some() {
            return Ok(());
        }
        let key = allowance.key_name.as_bytes();
        transaction((&self.resource_owners, &self.key_resources).transaction(|(owners, counts)| {
            if owners.get(resource_id)?.is_some() {
                return Ok(());
            }
            let count = count_of(counts.get(key)?);
            if count >= allowance.max_resources {
                return abort(StoreError::AllowanceExceeded {
                    key_name: allowance.key_name.clone(),
                    resource_id: resource_id.to_owned(),
                    limit: allowance.max_resources,
                });
            }
            owners.insert(resource_id, key)?;
            counts.insert(key, &(count + 1).to_be_bytes())?;
            Ok(())
        }))
    }

    /// Gives a deleted resource back to the key that created it.
    pub(super) fn release_resource(&self, resource_id: &str) -> Result<(), StoreError> {
        transaction((&self.resource_owners, &self.key_resources).transaction(|(owners, counts)| {
            if let Some(key) = owners.remove(resource_id)? {
                let count = count_of(counts.get(&key)?);
                if count <= 1 {
                    counts.remove(&key)?;
                } else {
                    counts.insert(&key, &(count - 1).to_be_bytes())?;
                }
            }
            Ok(())
        }))
    }
}
