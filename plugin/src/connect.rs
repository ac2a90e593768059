//! Connecting like kubectl: `--kubeconfig`, else `$KUBECONFIG`, else `~/.kube/config`, else the in-cluster service
//! account; `--context` picks a context. Also answers "who am I" for the audit trail of `force`.

use std::path::PathBuf;

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use kube::api::PostParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

use crate::error::{Error, KubeContext};

/// The connection flags every subcommand shares.
#[derive(Clone, Debug, Default)]
pub struct ConnectOptions {
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
}

/// A client, and the kubeconfig user it authenticates as (when it came from a kubeconfig).
pub struct Connection {
    pub client: Client,
    pub kubeconfig_user: Option<String>,
}

impl Connection {
    pub async fn open(options: &ConnectOptions) -> Result<Self, Error> {
        // kube talks TLS through rustls; pick its crypto provider once for the process (a second call is harmless).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let kubeconfig = match &options.kubeconfig {
            Some(path) => Some(
                Kubeconfig::read_from(path)
                    .map_err(|e| Error::Kubeconfig(format!("{}: {e}", path.display())))?,
            ),
            None => match Kubeconfig::read() {
                Ok(kubeconfig) => Some(kubeconfig),
                // A kubeconfig that exists but cannot be read is an error, not a reason to try in-cluster access.
                Err(e) if kubeconfig_present() => return Err(Error::Kubeconfig(e.to_string())),
                Err(_) => None,
            },
        };
        let (config, kubeconfig_user) = match kubeconfig {
            Some(kubeconfig) => {
                let user = context_user(&kubeconfig, options.context.as_deref());
                let kube_options = KubeConfigOptions {
                    context: options.context.clone(),
                    ..KubeConfigOptions::default()
                };
                let config = Config::from_custom_kubeconfig(kubeconfig, &kube_options)
                    .await
                    .map_err(|e| Error::Kubeconfig(e.to_string()))?;
                (config, user)
            }
            None if options.context.is_some() => {
                return Err(Error::Kubeconfig(
                    "--context needs a kubeconfig: none found in $KUBECONFIG or ~/.kube/config"
                        .into(),
                ));
            }
            None => (
                Config::incluster().map_err(|_| {
                    Error::Kubeconfig(
                        "none found: set KUBECONFIG, pass --kubeconfig, or run inside a cluster"
                            .into(),
                    )
                })?,
                None,
            ),
        };
        let client = Client::try_from(config).map_err(|e| Error::Kubeconfig(e.to_string()))?;
        Ok(Self {
            client,
            kubeconfig_user,
        })
    }

    /// The authenticated user's name as the apiserver sees it (SelfSubjectReview), falling back to the kubeconfig's
    /// user name when the apiserver does not offer the review.
    pub async fn user(&self) -> Result<String, Error> {
        let reviews: Api<SelfSubjectReview> = Api::all(self.client.clone());
        match reviews
            .create(&PostParams::default(), &SelfSubjectReview::default())
            .await
            .kube_context("asking the apiserver who you are (SelfSubjectReview)")
        {
            Ok(review) => Ok(review
                .status
                .and_then(|s| s.user_info)
                .and_then(|u| u.username)
                .or_else(|| self.kubeconfig_user.clone())
                .unwrap_or_else(|| "unknown user".to_owned())),
            Err(e) if matches!(e.code(), Some(403..=405)) => Ok(self
                .kubeconfig_user
                .clone()
                .unwrap_or_else(|| "unknown user".to_owned())),
            Err(e) => Err(e),
        }
    }
}

/// Whether `$KUBECONFIG` names files or `~/.kube/config` exists.
fn kubeconfig_present() -> bool {
    let from_env = std::env::var_os("KUBECONFIG")
        .is_some_and(|v| std::env::split_paths(&v).any(|p| !p.as_os_str().is_empty()));
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .is_some_and(|home| home.join(".kube").join("config").exists());
    from_env || home
}

/// The user named by the context in use (`--context`, else the current context).
fn context_user(kubeconfig: &Kubeconfig, context: Option<&str>) -> Option<String> {
    let name = context.or(kubeconfig.current_context.as_deref())?;
    kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == name)?
        .context
        .as_ref()?
        .user
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECONFIG: &str = "
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: 'https://127.0.0.1:1'}
users:
- name: alice
  user: {token: x}
- name: bob
  user: {token: y}
contexts:
- name: prod
  context: {cluster: c, user: alice}
- name: staging
  context: {cluster: c, user: bob}
current-context: prod
";

    #[test]
    fn the_user_of_the_context_in_use() {
        let kubeconfig = Kubeconfig::from_yaml(KUBECONFIG).unwrap();
        assert_eq!(context_user(&kubeconfig, None).as_deref(), Some("alice"));
        assert_eq!(
            context_user(&kubeconfig, Some("staging")).as_deref(),
            Some("bob")
        );
        assert_eq!(context_user(&kubeconfig, Some("nope")), None);
    }
}
