use serde::{Deserialize, Serialize};

/// Flow records keep the first 10 packets; a model cannot ask for more.
pub const MAX_PACKETS: usize = 10;
/// A size and an inter-arrival time per packet at most.
pub const MAX_FEATURES: usize = 2 * MAX_PACKETS;

/// Which numbers describe a flow. Stored in every model, so that a model
/// is always fed the vector it was trained on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeatureSpec {
    /// How many of the first packets (HPTRAC used 4).
    pub packets: usize,
    /// Add each packet's inter-arrival time after the sizes.
    pub inter_arrivals: bool,
}

impl Default for FeatureSpec {
    fn default() -> Self {
        FeatureSpec {
            packets: 4,
            inter_arrivals: false,
        }
    }
}

impl FeatureSpec {
    /// The length of the vector [`extract`](Self::extract) writes.
    pub fn dims(&self) -> usize {
        self.packets * if self.inter_arrivals { 2 } else { 1 }
    }

    /// Fills `out` (of length [`dims`](Self::dims)) from a flow's first
    /// packets: `sizes[i]` is packet i's length, bit i of `server_to_client`
    /// its direction, `inter_arrival_ns[i]` the time since the packet before.
    ///
    /// A size is signed by direction (client to server positive, server to
    /// client negative): the direction pattern of a flow's opening is as
    /// telling as the sizes. A packet the flow never had is 0. Inter-arrival
    /// times enter as log2 of microseconds: their spread spans six orders
    /// of magnitude, and a learner cares about the order, not the digits.
    pub fn extract(&self, sizes: &[u64], server_to_client: u32, inter_arrival_ns: &[u64], out: &mut [f32]) {
        debug_assert_eq!(out.len(), self.dims());
        let n = sizes.len().min(self.packets);
        for i in 0..self.packets {
            out[i] = if i < n {
                let size = sizes[i] as f32;
                if server_to_client >> i & 1 == 1 { -size } else { size }
            } else {
                0.0
            };
        }
        if self.inter_arrivals {
            for i in 0..self.packets {
                out[self.packets + i] = match inter_arrival_ns.get(i) {
                    Some(&ns) if i < n => ((ns / 1000) as f32 + 1.0).log2(),
                    _ => 0.0,
                };
            }
        }
    }

    pub fn check(&self) -> Result<(), String> {
        if self.packets == 0 || self.packets > MAX_PACKETS {
            return Err(format!(
                "the number of packets must be between 1 and {MAX_PACKETS} (flow records keep {MAX_PACKETS}), not {}",
                self.packets
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_signed_by_direction_and_missing_packets_are_zero() {
        let spec = FeatureSpec {
            packets: 4,
            inter_arrivals: true,
        };
        let mut out = [9.0; 8];
        spec.extract(&[74, 66, 583], 0b010, &[0, 1_000, 3_000_000], &mut out);
        assert_eq!(&out[..4], [74.0, -66.0, 583.0, 0.0]);
        assert_eq!(out[4], 0.0);
        assert_eq!(out[5], 1.0);
        assert!((out[6] - 3001f32.log2()).abs() < 1e-4);
        assert_eq!(out[7], 0.0);
    }

    #[test]
    fn packet_counts_outside_the_record_are_refused() {
        assert!(FeatureSpec::default().check().is_ok());
        let too_many = FeatureSpec {
            packets: 11,
            inter_arrivals: false,
        };
        assert!(too_many.check().unwrap_err().contains("between 1 and 10"));
    }
}
