import COpenSSL
public import TetherCore

/// SCRAM's cryptography from OpenSSL's libcrypto (`EVP_Digest`, `HMAC`, `PKCS5_PBKDF2_HMAC`).
///
/// The provider the Linux driver passes to `XMPPClientMachine`. It holds no state.
public struct OpenSSLHashProvider: SCRAMHashProvider {
    /// A provider.
    public init() {}

    private static func digest(_ algorithm: SCRAMHashAlgorithm) -> OpaquePointer {
        switch algorithm {
        case .sha1: EVP_sha1()
        case .sha256: EVP_sha256()
        case .sha512: EVP_sha512()
        }
    }

    public func hash(_ algorithm: SCRAMHashAlgorithm, _ data: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: algorithm.digestSize)
        var length: UInt32 = 0
        let status = data.withUnsafeBytes { input in
            output.withUnsafeMutableBufferPointer { output in
                EVP_Digest(input.baseAddress, input.count, output.baseAddress, &length, Self.digest(algorithm), nil)
            }
        }
        precondition(status == 1 && Int(length) == algorithm.digestSize, "EVP_Digest failed")
        return output
    }

    public func hmac(_ algorithm: SCRAMHashAlgorithm, key: [UInt8], data: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: algorithm.digestSize)
        var length: UInt32 = 0
        // An empty key still gets a valid pointer: OpenSSL reads a null key as "no key given".
        let keyLength = Int32(key.count)
        let storage = key.isEmpty ? [0] : key
        let result = storage.withUnsafeBytes { key in
            data.withUnsafeBytes { data in
                output.withUnsafeMutableBufferPointer { output in
                    HMAC(
                        Self.digest(algorithm),
                        key.baseAddress,
                        keyLength,
                        data.baseAddress?.assumingMemoryBound(to: UInt8.self),
                        data.count,
                        output.baseAddress,
                        &length
                    )
                }
            }
        }
        precondition(result != nil && Int(length) == algorithm.digestSize, "HMAC failed")
        return output
    }

    public func pbkdf2(_ algorithm: SCRAMHashAlgorithm, password: [UInt8], salt: [UInt8], iterations: Int) -> [UInt8] {
        precondition(iterations >= 1 && iterations <= Int(Int32.max), "PBKDF2 iterations out of range")
        var output = [UInt8](repeating: 0, count: algorithm.digestSize)
        let status = password.withUnsafeBytes { password in
            salt.withUnsafeBytes { salt in
                output.withUnsafeMutableBufferPointer { output in
                    PKCS5_PBKDF2_HMAC(
                        password.baseAddress?.assumingMemoryBound(to: CChar.self),
                        Int32(password.count),
                        salt.baseAddress?.assumingMemoryBound(to: UInt8.self),
                        Int32(salt.count),
                        Int32(iterations),
                        Self.digest(algorithm),
                        Int32(output.count),
                        output.baseAddress
                    )
                }
            }
        }
        precondition(status == 1, "PKCS5_PBKDF2_HMAC failed")
        return output
    }
}
