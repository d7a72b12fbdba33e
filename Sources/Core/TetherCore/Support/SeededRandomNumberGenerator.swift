/// A small, fast, deterministic random number generator (SplitMix64).
///
/// Tether's machines take their randomness (nonces, WebSocket masks, reconnect jitter) as an
/// injected generator; tests, simulations and the benchmark corpus pass this one with a fixed
/// seed so that every run is reproducible. It is not cryptographically secure.
public struct SeededRandomNumberGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// A generator whose sequence is determined by `seed`.
    public init(seed: UInt64) {
        state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
