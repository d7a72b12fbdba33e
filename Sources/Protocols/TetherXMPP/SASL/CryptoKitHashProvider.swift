#if canImport(CryptoKit)
    import CryptoKit
    public import TetherCore

    /// SCRAM's hash functions from CryptoKit, for Apple platforms (HMAC and PBKDF2 come from
    /// `SCRAMHashProvider`'s default implementations on top of them).
    public struct CryptoKitHashProvider: SCRAMHashProvider {
        /// A provider.
        public init() {}

        public func hash(_ algorithm: SCRAMHashAlgorithm, _ data: [UInt8]) -> [UInt8] {
            switch algorithm {
            case .sha1: Array(Insecure.SHA1.hash(data: data))
            case .sha256: Array(SHA256.hash(data: data))
            case .sha512: Array(SHA512.hash(data: data))
            }
        }
    }
#endif
