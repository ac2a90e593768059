//! Connecting like kubectl: `--kubeconfig`, else `$KUBECONFIG`, else `~/.kube/config`, else the
//! in-cluster service account; `--context` picks a context. Also answers "who am I" for the audit
//! trail of `force`.

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use kube::api::{PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

use crate::error::{Error, KubeContext};

/// The connection flags every subcommand shares.
#[derive(Clone, Debug, Default)]
pub struct ConnectOptions {
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    /// The kubeconfig cluster and user, instead of the context's (`--cluster`, `--user`).
    pub cluster: Option<String>,
    pub user: Option<String>,
    /// Impersonation (`--as`, `--as-group`).
    pub as_user: Option<String>,
    pub as_groups: Vec<String>,
    /// Bound on each request (`--request-timeout`); `None`: no limit.
    pub request_timeout: Option<Duration>,
    /// The command keeps watches open (`upgrade status --watch`): reads may idle until the watch's
    /// own timeout.
    pub long_lived: bool,
}

/// How long a connection attempt may take, whatever `--request-timeout` says.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longer than the server-side timeout of kube's watches (290 s), as kube's own default read
/// timeout.
const WATCH_READ_TIMEOUT: Duration = Duration::from_secs(295);

/// A client, and the kubeconfig user it authenticates as (when it came from a kubeconfig).
pub struct Connection {
    pub client: Client,
    pub kubeconfig_user: Option<String>,
}

impl Connection {
    pub async fn open(options: &ConnectOptions) -> Result<Self, Error> {
        // kube talks TLS through rustls; pick its crypto provider once for the process (a second
        // call is harmless).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let kubeconfig = match &options.kubeconfig {
            Some(path) => Some(
                Kubeconfig::read_from(path)
                    .map_err(|e| Error::Kubeconfig(format!("{}: {e}", path.display())))?,
            ),
            None => match Kubeconfig::read() {
                Ok(kubeconfig) => Some(kubeconfig),
                // A kubeconfig that exists but cannot be read is an error, not a reason to try
                // in-cluster access.
                Err(e) if kubeconfig_present() => return Err(Error::Kubeconfig(e.to_string())),
                Err(_) => None,
            },
        };
        let (config, kubeconfig_user) = match kubeconfig {
            Some(kubeconfig) => {
                let user = options
                    .user
                    .clone()
                    .or_else(|| context_user(&kubeconfig, options.context.as_deref()));
                let kube_options = KubeConfigOptions {
                    context: options.context.clone(),
                    cluster: options.cluster.clone(),
                    user: options.user.clone(),
                };
                let config = Config::from_custom_kubeconfig(kubeconfig, &kube_options)
                    .await
                    .map_err(|e| Error::Kubeconfig(e.to_string()))?;
                (config, user)
            }
            None if options.context.is_some()
                || options.cluster.is_some()
                || options.user.is_some() =>
            {
                return Err(Error::Kubeconfig(
                    "--context, --cluster and --user need a kubeconfig: none found in $KUBECONFIG or ~/.kube/config"
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
        let mut config = bounded(config, options);
        // As kubectl does: the Impersonate-User and Impersonate-Group headers on every request.
        if let Some(user) = &options.as_user {
            config.auth_info.impersonate = Some(user.clone());
            config.auth_info.impersonate_groups =
                (!options.as_groups.is_empty()).then(|| options.as_groups.clone());
        }
        let kubeconfig_user = options.as_user.clone().or(kubeconfig_user);
        let client = Client::try_from(config).map_err(|e| Error::Kubeconfig(e.to_string()))?;
        Ok(Self {
            client,
            kubeconfig_user,
        })
    }

    /// The authenticated user's name as the apiserver sees it (SelfSubjectReview), falling back to
    /// the kubeconfig's user name when the apiserver does not offer the review.
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

/// The field manager of every write the plugin makes, so `managedFields` tell the operator's hand
/// from k8sm's.
pub const FIELD_MANAGER: &str = "kubectl-k8sm";

pub fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
}

/// Applies the time bounds to every request of the connection.
fn bounded(mut config: Config, options: &ConnectOptions) -> Config {
    let limit = options.request_timeout;
    config.connect_timeout = Some(limit.map_or(CONNECT_TIMEOUT, |l| l.min(CONNECT_TIMEOUT)));
    config.read_timeout = if options.long_lived {
        Some(limit.map_or(WATCH_READ_TIMEOUT, |l| l.max(WATCH_READ_TIMEOUT)))
    } else {
        limit
    };
    config.write_timeout = limit;
    config
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

    /// kube's gzip feature: the plugin asks for gzipped answers, as kubectl does, and reads them.
    /// (A loopback server in the test's place of an apiserver: a real one gzips only large
    /// answers, unseen by a test.)
    #[tokio::test]
    async fn answers_are_asked_for_and_read_gzipped() {
        use std::io::Write;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            while !head.ends_with(b"\r\n\r\n") {
                let mut byte = [0u8; 1];
                if stream.read(&mut byte).await.unwrap() == 0 {
                    break;
                }
                head.push(byte[0]);
            }
            let version = serde_json::json!({
                "major": "1", "minor": "36", "gitVersion": "v1.36.0-gzipped", "gitCommit": "", "gitTreeState": "",
                "buildDate": "", "goVersion": "", "compiler": "", "platform": ""
            });
            let mut gzip =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            gzip.write_all(version.to_string().as_bytes()).unwrap();
            let body = gzip.finish().unwrap();
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: gzip\r\n\
                 content-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            stream.write_all(answer.as_bytes()).await.unwrap();
            stream.write_all(&body).await.unwrap();
            String::from_utf8_lossy(&head).to_lowercase()
        });
        let config = Config::new(format!("http://{address}").parse().unwrap());
        let client = Client::try_from(config).unwrap();
        let version = client
            .apiserver_version()
            .await
            .expect("a gzipped answer is read");
        assert_eq!(version.git_version, "v1.36.0-gzipped");
        let head = server.await.unwrap();
        assert!(head.contains("accept-encoding: gzip"), "{head}");
    }

    #[test]
    fn every_request_is_bounded_and_watches_outlive_their_server_timeout() {
        let options = |request_timeout, long_lived| ConnectOptions {
            request_timeout,
            long_lived,
            ..ConnectOptions::default()
        };
        let config = || Config::new("https://127.0.0.1:6443".parse().expect("a URL"));
        let short = bounded(config(), &options(Some(Duration::from_secs(3)), false));
        assert_eq!(short.connect_timeout, Some(Duration::from_secs(3)));
        assert_eq!(short.read_timeout, Some(Duration::from_secs(3)));
        assert_eq!(short.write_timeout, Some(Duration::from_secs(3)));
        let watching = bounded(config(), &options(Some(Duration::from_secs(3)), true));
        assert_eq!(watching.read_timeout, Some(WATCH_READ_TIMEOUT));
        let unlimited = bounded(config(), &options(None, false));
        assert_eq!(unlimited.connect_timeout, Some(CONNECT_TIMEOUT));
        assert_eq!(unlimited.read_timeout, None);
    }
}
