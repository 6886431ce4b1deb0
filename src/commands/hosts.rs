//! `lessonprobe hosts list|check`: what is configured, and what a host is and would run.

use crate::checkpoint::{Catalog, ProbeKind};
use crate::cli::{HostsAction, HostsArgs};
use crate::exit::{Code, Error};
use crate::remote::{check_host, HostsError, HostsFile};
use crate::run::RemoteFlag;

pub fn hosts(args: HostsArgs) -> Result<Code, Error> {
    match args.action {
        HostsAction::List { hosts } => {
            let file = match HostsFile::find(hosts.hosts.as_deref()) {
                Ok(file) => file,
                Err(HostsError::NotFound(none)) => {
                    outln!("{none}");
                    return Ok(Code::Ok);
                }
                Err(e) => return Err(e.into()),
            };
            outln!("{}", file.path.display());
            for h in &file.hosts {
                let auth = h
                    .identity
                    .as_ref()
                    .map_or("ssh agent".to_owned(), |p| format!("key {}", p.display()));
                outln!(
                    "  {:<16} {}@{} os={} known_hosts={} {auth}",
                    h.name,
                    h.user,
                    h.place(),
                    h.os,
                    h.known_hosts.display()
                );
            }
            Ok(Code::Ok)
        }
        HostsAction::Check {
            name,
            hosts,
            catalog,
        } => {
            let flag = RemoteFlag::from_env();
            if !flag.is_on() {
                return Err(Error::Usage(format!(
                    "hosts check connects to the host: {flag}; set it to 1"
                )));
            }
            let file = HostsFile::find(hosts.hosts.as_deref())?;
            let host = file.pick(name.as_deref().or(hosts.host.as_deref()))?;
            let catalog = Catalog::load(catalog.checkpoints.as_deref(), &super::builtin_names())?;
            let facts = check_host(host).map_err(|e| Error::Operation(e.to_string()))?;
            outln!("host {} ({}@{})", host.name, host.user, host.place());
            outln!(
                "  host key  {} (matches {})",
                facts.fingerprint,
                host.known_hosts.display()
            );
            outln!("  os        {}", facts.os);
            outln!("  workdir   {}", host.workdir);
            for cp in &catalog.checkpoints {
                for probe in &cp.probes {
                    if let ProbeKind::Remote { selector, script } = &probe.kind {
                        let cmds = host.commands(cp.lesson, selector, "<temp>/report.xml");
                        outln!("lesson {} {} {}:", cp.lesson, probe.id, probe.name);
                        if !cmds.env.is_empty() {
                            outln!("  env       {}", cmds.env);
                        }
                        if let Some(p) = &cmds.prepare {
                            outln!("  prepare   {p}");
                        }
                        outln!("  run       {}", cmds.run);
                        if let Some(t) = &cmds.teardown {
                            outln!("  teardown  {t}");
                        }
                        if let Some(s) = script {
                            outln!(
                                "  (the course runs it with: {})",
                                s.replace("{selector}", selector)
                            );
                        }
                    }
                }
            }
            Ok(Code::Ok)
        }
    }
}
