/// The hash functions SCRAM needs (RFC 5802 §2.2), chosen by name.
public enum SCRAMHashAlgorithm: String, Hashable, Sendable, CaseIterable {
    /// SHA-1 (SCRAM-SHA-1).
    case sha1 = "SHA-1"
    /// SHA-256 (SCRAM-SHA-256).
    case sha256 = "SHA-256"
    /// SHA-512 (SCRAM-SHA-512).
    case sha512 = "SHA-512"

    /// The digest length in bytes.
    public var digestSize: Int {
        switch self {
        case .sha1: 20
        case .sha256: 32
        case .sha512: 64
        }
    }

    /// The hash function's block size in bytes (HMAC pads its key to it, RFC 2104).
    public var blockSize: Int {
        switch self {
        case .sha1, .sha256: 64
        case .sha512: 128
        }
    }
}

/// Where SCRAM gets its cryptography: a hash function, HMAC and PBKDF2 (RFC 5802 §2.2).
///
/// Tether's pure modules contain no cryptography of their own. On Linux the driver passes
/// `OpenSSLHashProvider` (module `TetherTLS`, OpenSSL's libcrypto); an app on Apple platforms can
/// supply one built on CryptoKit. Only `hash` is required: HMAC (RFC 2104) and PBKDF2 (RFC 8018
/// §5.2, one block, as SCRAM's `Hi()` is) have default implementations on top of it, which a
/// provider replaces with its library's faster ones where it has them.
public protocol SCRAMHashProvider: Sendable {
    /// The digest of `data`.
    func hash(_ algorithm: SCRAMHashAlgorithm, _ data: [UInt8]) -> [UInt8]
    /// HMAC of `data` under `key`.
    func hmac(_ algorithm: SCRAMHashAlgorithm, key: [UInt8], data: [UInt8]) -> [UInt8]
    /// PBKDF2-HMAC of `password` with `salt` and `iterations`, one digest long (SCRAM's `Hi()`).
    func pbkdf2(_ algorithm: SCRAMHashAlgorithm, password: [UInt8], salt: [UInt8], iterations: Int) -> [UInt8]
}

extension SCRAMHashProvider {
    /// HMAC from the hash function (RFC 2104).
    public func hmac(_ algorithm: SCRAMHashAlgorithm, key: [UInt8], data: [UInt8]) -> [UInt8] {
        var block = key.count > algorithm.blockSize ? hash(algorithm, key) : key
        block += [UInt8](repeating: 0, count: algorithm.blockSize - block.count)
        let inner = hash(algorithm, block.map { $0 ^ 0x36 } + data)
        return hash(algorithm, block.map { $0 ^ 0x5C } + inner)
    }

    /// PBKDF2 from HMAC: `Hi(password, salt, i)` of RFC 5802 §2.2.
    public func pbkdf2(_ algorithm: SCRAMHashAlgorithm, password: [UInt8], salt: [UInt8], iterations: Int) -> [UInt8] {
        precondition(iterations >= 1, "PBKDF2 needs at least one iteration")
        var u = hmac(algorithm, key: password, data: salt + [0, 0, 0, 1])
        var result = u
        for _ in 1..<iterations {
            u = hmac(algorithm, key: password, data: u)
            for index in result.indices { result[index] ^= u[index] }
        }
        return result
    }
}
