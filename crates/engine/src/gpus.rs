//! Which GPUs an engine runs on (`--gpus`), and where a sharded index's shards go on them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The GPUs an engine may use: every device (`auto`), the first `N`, or a list of device numbers.
/// `CUDA_VISIBLE_DEVICES` chooses and orders the devices the driver shows before this counts them.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum GpuSet {
    /// Every device the driver shows.
    #[default]
    Auto,
    /// The first `n` devices (at least one).
    First(usize),
    /// These devices, in this order (distinct).
    Devices(Vec<usize>),
}

impl GpuSet {
    /// The devices to use, given how many the driver shows (`present`); an error names a device or
    /// count that is not there. Empty where there is no device and `auto` was asked for.
    pub fn devices(&self, present: usize) -> Result<Vec<usize>, String> {
        match self {
            GpuSet::Auto => Ok((0..present).collect()),
            GpuSet::First(n) if *n <= present => Ok((0..*n).collect()),
            GpuSet::First(n) => Err(format!("{n} GPUs asked for, {present} present")),
            GpuSet::Devices(list) => match list.iter().find(|&&d| d >= present) {
                Some(d) => Err(format!("no CUDA device {d} ({present} present)")),
                None => Ok(list.clone()),
            },
        }
    }
}

impl FromStr for GpuSet {
    type Err = String;

    fn from_str(s: &str) -> Result<GpuSet, String> {
        let s = s.trim();
        if s == "auto" || s == "all" {
            return Ok(GpuSet::Auto);
        }
        let bad = || format!("'{s}': use auto, a count of GPUs (2), or device numbers (0,1,3)");
        if !s.contains(',') {
            return match s.parse::<usize>() {
                Ok(0) | Err(_) => Err(bad()),
                Ok(n) => Ok(GpuSet::First(n)),
            };
        }
        let list = s
            .split(',')
            .map(|d| d.trim().parse::<usize>().map_err(|_| bad()))
            .collect::<Result<Vec<usize>, String>>()?;
        let mut seen = list.clone();
        seen.sort_unstable();
        if seen.windows(2).any(|w| w[0] == w[1]) {
            return Err(format!("'{s}': a device is named twice"));
        }
        Ok(GpuSet::Devices(list))
    }
}

impl fmt::Display for GpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GpuSet::Auto => f.write_str("auto"),
            GpuSet::First(n) => write!(f, "{n}"),
            GpuSet::Devices(list) => {
                let names: Vec<String> = list.iter().map(|d| d.to_string()).collect();
                f.write_str(&names.join(","))
            }
        }
    }
}

impl TryFrom<String> for GpuSet {
    type Error = String;

    fn try_from(s: String) -> Result<GpuSet, String> {
        s.parse()
    }
}

impl From<GpuSet> for String {
    fn from(g: GpuSet) -> String {
        g.to_string()
    }
}

/// The devices of each of `shards` shards over `devices`: with at least as many shards as devices,
/// shard i on device i mod n (shards spread evenly); with more devices than shards, each shard on a
/// group of its own (device j serves shard j mod shards), so that every device holds one shard and a
/// shard's devices are its replicas.
pub fn place_shards(shards: usize, devices: &[usize]) -> Vec<Vec<usize>> {
    if devices.is_empty() {
        return vec![Vec::new(); shards];
    }
    let mut placed = vec![Vec::new(); shards];
    if shards >= devices.len() {
        for (i, p) in placed.iter_mut().enumerate() {
            p.push(devices[i % devices.len()]);
        }
    } else {
        for (j, &d) in devices.iter().enumerate() {
            placed[j % shards].push(d);
        }
    }
    placed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_sets_parse_and_print_back() {
        for (text, set) in [
            ("auto", GpuSet::Auto),
            ("2", GpuSet::First(2)),
            ("0,3", GpuSet::Devices(vec![0, 3])),
            (" 1, 0 ", GpuSet::Devices(vec![1, 0])),
        ] {
            let parsed: GpuSet = text.parse().unwrap();
            assert_eq!(parsed, set);
            assert_eq!(parsed.to_string().parse::<GpuSet>().unwrap(), set);
        }
        for bad in ["0", "-1", "x", "0,0", "1,,2", "1,"] {
            assert!(bad.parse::<GpuSet>().is_err(), "{bad}");
        }
    }

    #[test]
    fn devices_are_checked_against_those_present() {
        assert_eq!(GpuSet::Auto.devices(0).unwrap(), Vec::<usize>::new());
        assert_eq!(GpuSet::Auto.devices(2).unwrap(), vec![0, 1]);
        assert_eq!(GpuSet::First(1).devices(4).unwrap(), vec![0]);
        assert!(GpuSet::First(3).devices(2).unwrap_err().contains("3 GPUs"));
        assert!(GpuSet::Devices(vec![0, 2])
            .devices(2)
            .unwrap_err()
            .contains("device 2"));
    }

    #[test]
    fn shards_are_placed_evenly_and_devices_all_used() {
        assert_eq!(place_shards(4, &[0, 1]), vec![vec![0], vec![1], vec![0], vec![1]]);
        assert_eq!(place_shards(2, &[0, 1, 2, 3]), vec![vec![0, 2], vec![1, 3]]);
        assert_eq!(place_shards(3, &[5]), vec![vec![5], vec![5], vec![5]]);
        assert_eq!(place_shards(2, &[]), vec![Vec::<usize>::new(); 2]);
        // Every device holds a shard, every shard has a device.
        for shards in 1..6 {
            for n in 1..6 {
                let devices: Vec<usize> = (0..n).collect();
                let placed = place_shards(shards, &devices);
                assert!(placed.iter().all(|p| !p.is_empty()));
                let mut used: Vec<usize> = placed.concat();
                used.sort_unstable();
                used.dedup();
                assert_eq!(used, devices);
            }
        }
    }
}
