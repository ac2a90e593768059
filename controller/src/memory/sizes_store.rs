//! Where the remembered sizes of unknown kinds live across restarts and leaders: one ConfigMap in
//! the controller's namespace, written before an eviction that counts on them, read back at the
//! start of each term.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};

use crate::Error;
use crate::memory::sizes::Stored;

pub const NAME: &str = "k8sm-observed-sizes";
const DATA_KEY: &str = "sizes.json";
const MANAGER: &str = "k8sm-controller";

pub struct SizesStore {
    api: Api<ConfigMap>,
}

impl SizesStore {
    pub fn new(client: Client, namespace: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
        }
    }

    /// What is stored; nothing when the ConfigMap does not exist. A record that cannot be decoded
    /// is an error: the sizes it held would be lost.
    pub async fn load(&self) -> Result<Stored, Error> {
        let Some(config_map) = self.api.get_opt(NAME).await? else {
            return Ok(Stored::default());
        };
        match config_map.data.as_ref().and_then(|d| d.get(DATA_KEY)) {
            None => Ok(Stored::default()),
            Some(text) => serde_json::from_str(text).map_err(|e| {
                Error::Other(format!(
                    "ConfigMap {NAME}: {DATA_KEY} cannot be read ({e}); delete it only once no operator's pod is \
                     missing"
                ))
            }),
        }
    }

    pub async fn save(&self, stored: &Stored) -> Result<(), Error> {
        let config_map = ConfigMap {
            metadata: ObjectMeta {
                name: Some(NAME.to_owned()),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([(
                DATA_KEY.to_owned(),
                serde_json::to_string(stored)?,
            )])),
            ..ConfigMap::default()
        };
        self.api
            .patch(
                NAME,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(&config_map),
            )
            .await?;
        Ok(())
    }
}
