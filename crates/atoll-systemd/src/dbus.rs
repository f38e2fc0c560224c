//! [`DbusManager`]: the [`Manager`] over systemd's real D-Bus API, with
//! zbus's blocking API (zbus runs its own small executor thread; no tokio).
//!
//! Which bus: the system bus (`$DBUS_SYSTEM_BUS_ADDRESS`, else
//! `/run/dbus/system_bus_socket`), systemd's documented interface and what
//! kubelet's and runc's systemd drivers use by default; tests and unusual
//! hosts name another address ([`BusAddress::Address`]). Not systemd's
//! private socket `/run/systemd/private` (peer to peer, no dbus-daemon,
//! which go-systemd offers root as a fallback): systemd answers there with
//! its well-known name `org.freedesktop.systemd1` as the sender, which zbus
//! 5 only accepts as a unique name (`:1.42`); its reader thread panics and
//! the call times out (seen with systemd 252 in the systemd VM guest). atoll
//! needs dbus-daemon (or dbus-broker) running, as kubelet does.
//!
//! A call that fails on the bus (not with systemd's answer) drops the
//! connection; the next call connects again, so a restarted dbus-daemon or a
//! re-executed systemd costs one failed call.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use serde::Serialize;
use zbus::blocking::connection::Builder;
use zbus::blocking::Connection;
use zbus::zvariant::{DynamicType, OwnedObjectPath, OwnedValue, Value};

use crate::manager::{type_interface, Manager, ManagerError, UnitInfo};
use crate::value::PropValue;

/// The system bus's usual address.
pub const SYSTEM_BUS: &str = "unix:path=/run/dbus/system_bus_socket";

const DEST: &str = "org.freedesktop.systemd1";
const PATH: &str = "/org/freedesktop/systemd1";
const MANAGER: &str = "org.freedesktop.systemd1.Manager";
const UNIT: &str = "org.freedesktop.systemd1.Unit";
const PROPERTIES: &str = "org.freedesktop.DBus.Properties";

/// Where to reach systemd.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum BusAddress {
    /// The system bus: `$DBUS_SYSTEM_BUS_ADDRESS`, else [`SYSTEM_BUS`].
    #[default]
    System,
    /// A message bus at this D-Bus address
    /// (`unix:path=/run/dbus/system_bus_socket`).
    Address(String),
}

impl std::fmt::Display for BusAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::System => f.write_str("the system bus"),
            Self::Address(a) => f.write_str(a),
        }
    }
}

/// systemd over D-Bus.
#[derive(Debug)]
pub struct DbusManager {
    address: BusAddress,
    timeout: Duration,
    conn: Mutex<Option<Connection>>,
    /// Unit name to object path (`LoadUnit`'s answer; paths never change).
    paths: Mutex<BTreeMap<String, OwnedObjectPath>>,
}

fn bus_err(e: zbus::Error) -> ManagerError {
    match e {
        zbus::Error::MethodError(name, detail, _) => ManagerError::Method {
            name: name.to_string(),
            message: detail.unwrap_or_default(),
        },
        zbus::Error::FDO(e) => {
            use zbus::DBusError as _;
            ManagerError::Method {
                name: e.name().to_string(),
                message: e.description().unwrap_or_default().to_string(),
            }
        }
        other => ManagerError::Bus(other.to_string()),
    }
}

fn open(address: &BusAddress, timeout: Duration) -> Result<Connection, String> {
    let builder = match address {
        BusAddress::System => Builder::system(),
        BusAddress::Address(a) => Builder::address(a.as_str()),
    }
    .map_err(|e| e.to_string())?;
    builder
        .method_timeout(timeout)
        .build()
        .map_err(|e| e.to_string())
}

fn to_value(v: &PropValue) -> Value<'static> {
    match v {
        PropValue::U64(n) => Value::U64(*n),
        PropValue::Bytes(b) => Value::from(b.clone()),
        PropValue::DeviceLimits(l) => Value::from(l.clone()),
        PropValue::Str(s) => Value::from(s.clone()),
        PropValue::Bool(b) => Value::Bool(*b),
        PropValue::Pids(p) => Value::from(p.clone()),
    }
}

fn from_value(v: Value<'_>) -> Option<PropValue> {
    Some(match v {
        Value::U64(n) => PropValue::U64(n),
        Value::Str(s) => PropValue::Str(s.to_string()),
        Value::Bool(b) => PropValue::Bool(b),
        Value::Value(inner) => return from_value(*inner),
        Value::Array(a) => match a.element_signature().to_string().as_str() {
            "y" => PropValue::Bytes(Vec::<u8>::try_from(a).ok()?),
            "(st)" => PropValue::DeviceLimits(Vec::<(String, u64)>::try_from(a).ok()?),
            "u" => PropValue::Pids(Vec::<u32>::try_from(a).ok()?),
            _ => return None,
        },
        _ => return None,
    })
}

fn props_body(props: &[(String, PropValue)]) -> Vec<(String, Value<'static>)> {
    props
        .iter()
        .map(|(k, v)| (k.clone(), to_value(v)))
        .collect()
}

impl DbusManager {
    /// Connects to systemd at `address`; every call waits at most
    /// `timeout` for its answer.
    pub fn connect(address: BusAddress, timeout: Duration) -> Result<Self, String> {
        let conn = open(&address, timeout)?;
        Ok(Self {
            address,
            timeout,
            conn: Mutex::new(Some(conn)),
            paths: Mutex::new(BTreeMap::new()),
        })
    }

    /// Where it is connected.
    pub fn address(&self) -> &BusAddress {
        &self.address
    }

    fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn connection(&self) -> Result<Connection, ManagerError> {
        let mut slot = Self::lock(&self.conn);
        if let Some(c) = slot.as_ref() {
            return Ok(c.clone());
        }
        let c = open(&self.address, self.timeout).map_err(ManagerError::Bus)?;
        *slot = Some(c.clone());
        Ok(c)
    }

    fn call<B>(
        &self,
        path: &str,
        iface: &str,
        method: &str,
        body: &B,
    ) -> Result<zbus::Message, ManagerError>
    where
        B: Serialize + DynamicType,
    {
        let conn = self.connection()?;
        conn.call_method(Some(DEST), path, Some(iface), method, body)
            .map_err(|e| {
                let e = bus_err(e);
                if matches!(e, ManagerError::Bus(_)) {
                    *Self::lock(&self.conn) = None;
                }
                e
            })
    }

    fn get(
        &self,
        path: &str,
        iface: &str,
        property: &str,
    ) -> Result<Option<PropValue>, ManagerError> {
        let reply = match self.call(path, PROPERTIES, "Get", &(iface, property)) {
            Ok(r) => r,
            // An older systemd without the property.
            Err(ManagerError::Method { name, .. })
                if name == "org.freedesktop.DBus.Error.UnknownProperty"
                    || name == "org.freedesktop.DBus.Error.InvalidArgs" =>
            {
                return Ok(None)
            }
            Err(e) => return Err(e),
        };
        let v: OwnedValue = reply
            .body()
            .deserialize()
            .map_err(|e| ManagerError::Bus(format!("{iface}.{property}: {e}")))?;
        Ok(from_value(Value::from(v)))
    }

    fn get_str(&self, path: &str, iface: &str, property: &str) -> Result<String, ManagerError> {
        match self.get(path, iface, property)? {
            Some(PropValue::Str(s)) => Ok(s),
            other => Err(ManagerError::Bus(format!(
                "{iface}.{property} is {other:?}, not a string"
            ))),
        }
    }

    fn unit_path(&self, name: &str) -> Result<OwnedObjectPath, ManagerError> {
        if let Some(p) = Self::lock(&self.paths).get(name) {
            return Ok(p.clone());
        }
        let reply = self.call(PATH, MANAGER, "LoadUnit", &(name,))?;
        let path: OwnedObjectPath = reply
            .body()
            .deserialize()
            .map_err(|e| ManagerError::Bus(format!("LoadUnit {name}: {e}")))?;
        Self::lock(&self.paths).insert(name.to_string(), path.clone());
        Ok(path)
    }

    fn manager_call<B>(&self, method: &str, body: &B) -> Result<(), ManagerError>
    where
        B: Serialize + DynamicType,
    {
        self.call(PATH, MANAGER, method, body).map(drop)
    }
}

fn type_iface(name: &str) -> Result<&'static str, ManagerError> {
    type_interface(name).ok_or_else(|| {
        ManagerError::method(
            "org.freedesktop.DBus.Error.InvalidArgs",
            format!("{name} is not of a unit type with a cgroup"),
        )
    })
}

impl Manager for DbusManager {
    fn version(&self) -> Result<String, ManagerError> {
        self.get_str(PATH, MANAGER, "Version")
    }

    fn unit(&self, name: &str) -> Result<UnitInfo, ManagerError> {
        let iface = type_iface(name)?;
        let path = self.unit_path(name)?;
        let p = path.as_str();
        Ok(UnitInfo {
            load_state: self.get_str(p, UNIT, "LoadState")?,
            active_state: self.get_str(p, UNIT, "ActiveState")?,
            control_group: match self.get(p, iface, "ControlGroup")? {
                Some(PropValue::Str(s)) => s,
                _ => String::new(),
            },
        })
    }

    fn properties(
        &self,
        name: &str,
        properties: &[&str],
    ) -> Result<BTreeMap<String, PropValue>, ManagerError> {
        let iface = type_iface(name)?;
        let path = self.unit_path(name)?;
        let mut out = BTreeMap::new();
        for p in properties {
            if let Some(v) = self.get(path.as_str(), iface, p)? {
                out.insert(p.to_string(), v);
            }
        }
        Ok(out)
    }

    fn set_properties(
        &self,
        name: &str,
        props: &[(String, PropValue)],
    ) -> Result<(), ManagerError> {
        self.manager_call("SetUnitProperties", &(name, true, props_body(props)))
    }

    fn start_scope(&self, name: &str, props: &[(String, PropValue)]) -> Result<(), ManagerError> {
        let aux: Vec<(String, Vec<(String, Value<'static>)>)> = Vec::new();
        self.manager_call(
            "StartTransientUnit",
            &(name, "fail", props_body(props), aux),
        )
    }

    fn attach(&self, name: &str, subcgroup: &str, pids: &[u32]) -> Result<(), ManagerError> {
        self.manager_call("AttachProcessesToUnit", &(name, subcgroup, pids.to_vec()))
    }

    fn freeze(&self, name: &str) -> Result<(), ManagerError> {
        self.manager_call("FreezeUnit", &(name,))
    }

    fn thaw(&self, name: &str) -> Result<(), ManagerError> {
        self.manager_call("ThawUnit", &(name,))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_cross_the_bus_with_systemds_signatures() {
        for (v, sig) in [
            (PropValue::U64(7), "t"),
            (PropValue::Bytes(vec![0x0f]), "ay"),
            (
                PropValue::DeviceLimits(vec![("/dev/block/8:0".into(), 5)]),
                "a(st)",
            ),
            (PropValue::DeviceLimits(vec![]), "a(st)"),
            (PropValue::Str("atoll.slice".into()), "s"),
            (PropValue::Bool(true), "b"),
            (PropValue::Pids(vec![42]), "au"),
        ] {
            let value = to_value(&v);
            assert_eq!(value.value_signature().to_string(), sig, "{v:?}");
            assert_eq!(from_value(value), Some(v));
        }
        assert_eq!(from_value(Value::I32(1)), None);
    }

    #[test]
    fn a_missing_bus_is_a_connect_error() {
        let d = std::env::temp_dir().join("atoll-systemd-no-such-socket");
        let a = format!("unix:path={}", d.display());
        let e = DbusManager::connect(BusAddress::Address(a.clone()), Duration::from_secs(1))
            .unwrap_err();
        assert!(!e.is_empty());
        assert_eq!(BusAddress::Address(a.clone()).to_string(), a);
        assert_eq!(BusAddress::default(), BusAddress::System);
    }
}
