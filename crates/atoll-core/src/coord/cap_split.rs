//! The platform CPU cap split by demand (rule 10 of the
//! [module docs](super)): pure arithmetic in thousandths of a CPU.

/// What one island showed over the last window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Demand {
    /// Its cap now, thousandths.
    pub cap: u64,
    /// Its CPUs, thousandths (the most it can use).
    pub cpus: u64,
    /// Mean usage over the window, CPUs; `None`: no sample, so it keeps
    /// its cap.
    pub used: Option<f64>,
    /// Whether it was throttled at its cap in the window.
    pub throttled: bool,
}

/// The caps that split the sum of `islands`' caps by demand, or `None`
/// when no island was throttled. Islands that were not throttled keep
/// `used + headroom` (at least `min`, at most their cap); the rest goes to
/// the throttled ones in proportion to their CPUs, each at least `min` and
/// at most its CPUs; what they cannot take goes back to the others, up to
/// their caps. The result sums exactly to the caps before.
pub(crate) fn split_by_demand(islands: &[Demand], min: u64, headroom: f64) -> Option<Vec<u64>> {
    let thr: Vec<usize> = (0..islands.len())
        .filter(|i| islands[*i].used.is_some() && islands[*i].throttled)
        .collect();
    if thr.is_empty() {
        return None;
    }
    let total: u64 = islands.iter().map(|d| d.cap).sum();
    let mut out: Vec<u64> = islands
        .iter()
        .map(|d| match d.used {
            Some(u) if !d.throttled => {
                let keep = crate::num::saturating_u64(((u + headroom) * 1000.0).round());
                keep.max(min).min(d.cap.max(min))
            }
            _ => d.cap,
        })
        .collect();
    let kept: u64 = (0..islands.len())
        .filter(|i| !thr.contains(i))
        .map(|i| out[i])
        .sum();
    let rest = total.saturating_sub(kept);
    let bounds: Vec<(u64, u64, u64)> = thr
        .iter()
        .map(|i| {
            let d = islands[*i];
            let hi = d.cpus.max(min);
            (d.cpus.max(1), min.min(hi), hi)
        })
        .collect();
    let shares = water_fill(rest, &bounds);
    let mut left = rest - shares.iter().sum::<u64>();
    for (k, i) in thr.iter().enumerate() {
        out[*i] = shares[k];
    }
    // What the throttled islands cannot use goes back to the others, up to
    // their caps, then (with nobody left to take it) to the first island.
    for (i, d) in islands.iter().enumerate() {
        if left == 0 {
            break;
        }
        if thr.contains(&i) {
            continue;
        }
        let room = d.cap.saturating_sub(out[i]);
        let give = room.min(left);
        out[i] += give;
        left -= give;
    }
    if let Some(first) = out.first_mut() {
        *first += left;
    }
    Some(out)
}

/// Splits `amount` in proportion to each `(weight, low, high)`, each share
/// within `[low, high]` as long as the bounds allow; returns at most
/// `amount` in all (less only when every share sits at its `high`).
fn water_fill(amount: u64, bounds: &[(u64, u64, u64)]) -> Vec<u64> {
    let n = bounds.len();
    let mut fixed: Vec<Option<u64>> = vec![None; n];
    loop {
        let free: Vec<usize> = (0..n).filter(|i| fixed[*i].is_none()).collect();
        if free.is_empty() {
            break;
        }
        let taken: u64 = fixed.iter().flatten().sum();
        let pool = amount.saturating_sub(taken);
        let weight: u64 = free.iter().map(|i| bounds[*i].0).sum();
        let share = |i: usize| {
            u64::try_from(u128::from(pool) * u128::from(bounds[i].0) / u128::from(weight))
                .unwrap_or(u64::MAX)
        };
        // Pin the shares above their bounds first (that leaves more to the
        // others), then those below (that leaves less, never pushing one
        // above), and split again.
        let high: Vec<usize> = free
            .iter()
            .copied()
            .filter(|i| share(*i) > bounds[*i].2)
            .collect();
        let low: Vec<usize> = free
            .iter()
            .copied()
            .filter(|i| share(*i) < bounds[*i].1)
            .collect();
        if !high.is_empty() {
            for i in high {
                fixed[i] = Some(bounds[i].2);
            }
            continue;
        }
        if !low.is_empty() {
            for i in low {
                fixed[i] = Some(bounds[i].1);
            }
            continue;
        }
        let mut shares: Vec<u64> = free.iter().map(|i| share(*i)).collect();
        // Each floor loses less than one thousandth: fewer than n are left,
        // and none of them lands above its bound (it was below before).
        let mut left = pool - shares.iter().sum::<u64>();
        for (k, i) in free.iter().enumerate() {
            if left == 0 {
                break;
            }
            if shares[k] < bounds[*i].2 {
                shares[k] += 1;
                left -= 1;
            }
        }
        for (k, i) in free.iter().enumerate() {
            fixed[*i] = Some(shares[k]);
        }
    }
    let mut out: Vec<u64> = fixed.into_iter().map(|f| f.unwrap_or(0)).collect();
    // Lows pinned beyond what there was: take back from the largest.
    let mut over = out.iter().sum::<u64>().saturating_sub(amount);
    while over > 0 {
        let Some(i) = (0..n)
            .filter(|i| out[*i] > 0)
            .max_by_key(|i| (out[*i], std::cmp::Reverse(*i)))
        else {
            break;
        };
        let cut = over.min(out[i]);
        out[i] -= cut;
        over -= cut;
    }
    out
}
