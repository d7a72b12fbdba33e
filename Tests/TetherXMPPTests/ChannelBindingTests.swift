import Testing
import TetherCore
import TetherTLS
import TetherTestSupport

@testable import TetherXMPP

/// SCRAM's GS2 header and `c=` with channel binding (RFC 5802 §6–7), on the RFC vectors' inputs.
/// The expected messages were computed with Python's hashlib and hmac from the RFC inputs (the
/// same script reproduces the RFCs' own `n,,` vectors).
struct SCRAMChannelBindingTests {
    /// 32 bytes 0x01…0x20 standing for tls-exporter data.
    static let exporterData = Array(UInt8(1)...UInt8(32))

    @Test func boundToTLSExporter() throws {
        var scram = try SCRAMClient(
            mechanism: .sha256,
            username: "user",
            password: "pencil",
            nonce: "rOprNGfwEbeRWgbNEkqO",
            hashProvider: OpenSSLHashProvider(),
            channelBinding: .bound(.tlsExporter, data: Self.exporterData)
        )
        #expect(scram.mechanismName == "SCRAM-SHA-256-PLUS")
        #expect(
            String(decoding: scram.clientFirstMessage, as: UTF8.self) == "p=tls-exporter,,n=user,r=rOprNGfwEbeRWgbNEkqO"
        )
        let final = try scram.clientFinalMessage(
            serverFirst: Array(
                "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".utf8
            )
        )
        #expect(
            String(decoding: final, as: UTF8.self)
                == "c=cD10bHMtZXhwb3J0ZXIsLAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8g,"
                + "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=w9H9vIo/jsodntpDDeLdytQa0oto6PYDAlsEKQDvVkQ="
        )
        try scram.verifyServerFinal(Array("v=SN+XrkAt4u+71j5SzONCA0NMw4hYbX7jqgJparCXX10=".utf8))
        #expect(scram.isVerified)
    }

    @Test func couldBindButTheServerOfferedNoPLUS() throws {
        var scram = try SCRAMClient(
            mechanism: .sha1,
            username: "user",
            password: "pencil",
            nonce: "fyko+d2lbbFgONRv9qkxdawL",
            hashProvider: OpenSSLHashProvider(),
            channelBinding: .serverOfferedNone
        )
        #expect(scram.mechanismName == "SCRAM-SHA-1")
        #expect(String(decoding: scram.clientFirstMessage, as: UTF8.self) == "y,,n=user,r=fyko+d2lbbFgONRv9qkxdawL")
        let final = try scram.clientFinalMessage(
            serverFirst: Array("r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096".utf8)
        )
        #expect(
            String(decoding: final, as: UTF8.self)
                == "c=eSws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=BjZF5dV+EkD3YCb3pH3IP8riMGw="
        )
        try scram.verifyServerFinal(Array("v=dsprQ5R2AGYt1kn4bQRwTAE0PTU=".utf8))
    }

    /// The server's signature covers `c=`: the signature for an unbound exchange does not verify
    /// a bound one (a relay that strips the binding is caught on both sides).
    @Test func theServerSignatureCoversTheBinding() throws {
        var scram = try SCRAMClient(
            mechanism: .sha1,
            username: "user",
            password: "pencil",
            nonce: "fyko+d2lbbFgONRv9qkxdawL",
            hashProvider: OpenSSLHashProvider(),
            channelBinding: .bound(.tlsUnique, data: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])
        )
        _ = try scram.clientFinalMessage(
            serverFirst: Array("r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096".utf8)
        )
        expectThrows(\SCRAMError.kind, .serverSignatureMismatch) {
            try scram.verifyServerFinal(Array("v=rmF9pqV8S7suAoZWja4dJRkFsKQ=".utf8))
        }
    }
}

/// Which mechanism and GS2 flag a login chooses (XEP-0440, RFC 5802 §6, RFC 9266 §3).
struct ChannelBindingChoiceTests {
    static let tls13 = TLSChannelBindings(
        protocolVersion: "TLSv1.3",
        data: [.tlsExporter: Array(repeating: 1, count: 32), .tlsServerEndPoint: Array(repeating: 2, count: 32)]
    )
    static let tls12 = TLSChannelBindings(
        protocolVersion: "TLSv1.2",
        data: [.tlsUnique: Array(repeating: 3, count: 12), .tlsServerEndPoint: Array(repeating: 2, count: 32)]
    )

    func choose(
        _ offered: [String],
        tls: TLSChannelBindings,
        serverTypes: [String]? = nil,
        policy: ChannelBindingPolicy = .whenPossible
    ) -> Result<(SASLMechanism, SCRAMClient.ChannelBinding), XMPPClientError> {
        SASLMechanism.choose(
            offered: offered,
            preferred: SASLMechanism.allCases,
            secured: tls != .none,
            allowPlainOnCleartext: false,
            tls: tls,
            serverBindingTypes: serverTypes,
            policy: policy
        )
    }

    func flag(_ result: Result<(SASLMechanism, SCRAMClient.ChannelBinding), XMPPClientError>) -> String {
        switch result {
        case .success((let mechanism, .bound(let type, _))): "\(mechanism.rawValue)-PLUS \(type.rawValue)"
        case .success((let mechanism, .serverOfferedNone)): "\(mechanism.rawValue) y"
        case .success((let mechanism, .none)): "\(mechanism.rawValue) n"
        case .failure(let error): "\(error.kind)"
        }
    }

    @Test func theVersionAndTheServersListDecide() {
        let plus = ["SCRAM-SHA-1", "SCRAM-SHA-256", "SCRAM-SHA-1-PLUS", "SCRAM-SHA-256-PLUS", "PLAIN"]
        // TLS 1.3: tls-exporter when listed or when the server lists nothing (its default).
        #expect(
            flag(choose(plus, tls: Self.tls13, serverTypes: ["tls-exporter", "tls-server-end-point"]))
                == "SCRAM-SHA-256-PLUS tls-exporter"
        )
        #expect(flag(choose(plus, tls: Self.tls13)) == "SCRAM-SHA-256-PLUS tls-exporter")
        #expect(
            flag(choose(plus, tls: Self.tls13, serverTypes: ["tls-server-end-point"]))
                == "SCRAM-SHA-256-PLUS tls-server-end-point"
        )
        // tls-unique is never used on TLS 1.3, even when listed.
        #expect(flag(choose(plus, tls: Self.tls13, serverTypes: ["tls-unique"])) == "SCRAM-SHA-256 n")
        // TLS 1.2: tls-unique by default, tls-server-end-point when that is all the server has.
        #expect(flag(choose(plus, tls: Self.tls12)) == "SCRAM-SHA-256-PLUS tls-unique")
        #expect(
            flag(choose(plus, tls: Self.tls12, serverTypes: ["tls-server-end-point"]))
                == "SCRAM-SHA-256-PLUS tls-server-end-point"
        )
        #expect(flag(choose(plus, tls: Self.tls12, serverTypes: ["tls-exporter"])) == "SCRAM-SHA-256 n")
    }

    @Test func plusIsPreferredOverAStrongerHash() {
        #expect(flag(choose(["SCRAM-SHA-256", "SCRAM-SHA-1-PLUS"], tls: Self.tls12)) == "SCRAM-SHA-1-PLUS tls-unique")
    }

    @Test func theGS2Flag() {
        // Could bind, no -PLUS offered: y (a server that supports binding then sees the downgrade).
        #expect(flag(choose(["SCRAM-SHA-1", "PLAIN"], tls: Self.tls13)) == "SCRAM-SHA-1 y")
        // No TLS, or binding turned off: n.
        #expect(flag(choose(["SCRAM-SHA-1", "SCRAM-SHA-1-PLUS"], tls: .none)) == "SCRAM-SHA-1 n")
        #expect(
            flag(choose(["SCRAM-SHA-1", "SCRAM-SHA-1-PLUS"], tls: Self.tls12, policy: .disabled)) == "SCRAM-SHA-1 n"
        )
        #expect(flag(choose(["SCRAM-SHA-1"], tls: Self.tls12, policy: .disabled)) == "SCRAM-SHA-1 n")
    }

    @Test func requiredFailsWhenNoBindingIsPossible() {
        let cases: [([String], TLSChannelBindings, [String]?)] = [
            (["SCRAM-SHA-1", "SCRAM-SHA-1-PLUS"], .none, nil),
            (["SCRAM-SHA-1", "PLAIN"], Self.tls13, nil),
            (["SCRAM-SHA-1-PLUS"], Self.tls13, ["tls-unique"]),
        ]
        for (offered, tls, types) in cases {
            guard case .failure(let error) = choose(offered, tls: tls, serverTypes: types, policy: .required) else {
                Issue.record("\(offered) on \(tls) was accepted")
                continue
            }
            #expect(error.kind == .channelBindingUnavailable && error.isFatal)
            #expect(error.message.hasPrefix("Channel binding is required but not possible:"))
        }
        #expect(flag(choose(["SCRAM-SHA-1-PLUS"], tls: Self.tls12, policy: .required)) == "SCRAM-SHA-1-PLUS tls-unique")
    }

    @Test func theBindingsKeepOnlyWhatTheVersionDefines() {
        let mixed: [ChannelBindingType: [UInt8]] = [.tlsExporter: [1], .tlsUnique: [2], .tlsServerEndPoint: [3]]
        #expect(
            TLSChannelBindings(protocolVersion: "TLSv1.3", data: mixed).types == [.tlsExporter, .tlsServerEndPoint]
        )
        #expect(TLSChannelBindings(protocolVersion: "TLSv1.2", data: mixed).types == [.tlsUnique, .tlsServerEndPoint])
        #expect(!"\(TLSChannelBindings(protocolVersion: "TLSv1.3", data: mixed))".contains("[1]"))
    }
}

/// XEP-0474: the server's `h=` in the server-first-message is checked against the lists the
/// client saw. Expected hashes computed with Python's hashlib from the XEP's algorithm.
struct DowngradeProtectionTests {
    static let fullList = ["SCRAM-SHA-1", "SCRAM-SHA-1-PLUS", "SCRAM-SHA-256", "SCRAM-SHA-256-PLUS", "PLAIN"]

    func client(_ mechanisms: [String], _ types: [String]?) throws -> SCRAMClient {
        try SCRAMClient(
            mechanism: .sha256,
            username: "user",
            password: "pencil",
            nonce: "rOprNGfwEbeRWgbNEkqO",
            hashProvider: OpenSSLHashProvider(),
            offered: (mechanisms, types)
        )
    }

    func serverFirst(h: String?) -> [UInt8] {
        Array(
            ("r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
                + (h.map { ",h=" + $0 } ?? "")).utf8
        )
    }

    @Test func theHashOverWhatTheClientSaw() throws {
        let input = SCRAMClient.downgradeProtectionInput(Self.fullList, ["tls-server-end-point", "tls-exporter"])
        #expect(
            Base64.encode(OpenSSLHashProvider().hash(.sha256, input)) == "HsVT3zgfiif56i/w96g+XTr+Rx/Yfkw1VkxOAdVb9Wk="
        )
        #expect(
            Base64.encode(
                OpenSSLHashProvider().hash(.sha1, SCRAMClient.downgradeProtectionInput(["SCRAM-SHA-1", "PLAIN"], nil))
            )
                == "Y+xk2TW25vKwG9yWicfQlsuiFQs="
        )
        var matching = try client(Self.fullList.reversed(), ["tls-exporter", "tls-server-end-point"])
        _ = try matching.clientFinalMessage(serverFirst: serverFirst(h: "HsVT3zgfiif56i/w96g+XTr+Rx/Yfkw1VkxOAdVb9Wk="))
    }

    @Test func aListChangedOnTheWayIsCaught() throws {
        // Someone removed the -PLUS mechanisms and the channel-binding list before the client saw them.
        var client = try client(["SCRAM-SHA-1", "SCRAM-SHA-256", "PLAIN"], nil)
        expectThrows(\SCRAMError.kind, .downgradeDetected) {
            _ = try client.clientFinalMessage(
                serverFirst: serverFirst(h: "HsVT3zgfiif56i/w96g+XTr+Rx/Yfkw1VkxOAdVb9Wk=")
            )
        }
    }

    @Test func aServerWithoutTheAttributeIsNotChecked() throws {
        var client = try client(["SCRAM-SHA-256"], nil)
        _ = try client.clientFinalMessage(serverFirst: serverFirst(h: nil))
    }

    @Test func theMachineAbandonsTheLogin() throws {
        let harness = XMPPClientHarness { $0.mechanisms = [.scramSHA1, .plain] }
        harness.open(XMPPClientHarness.mechanisms(["SCRAM-SHA-1", "PLAIN"]))
        let challenge = harness.scramServer.challenge(forAuth: saslPayload(harness.lastSent))
        // The server signed a list with SCRAM-SHA-256 in it, which the client never saw.
        let tampered =
            String(decoding: Base64.decode(challenge)!, as: UTF8.self) + ",h="
            + Base64.encode(
                OpenSSLHashProvider().hash(
                    .sha1,
                    SCRAMClient.downgradeProtectionInput(["SCRAM-SHA-1", "SCRAM-SHA-256", "PLAIN"], nil)
                )
            )
        harness.server(
            "<challenge xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>\(Base64.encode(Array(tampered.utf8)))</challenge>"
        )
        let error = try closedError(harness.events)
        #expect(error.kind == .downgradeDetected && error.isFatal)
        #expect(harness.sent.contains { $0.text == "<abort xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>" })
    }

    @Test func theMachineAcceptsAMatchingHash() throws {
        let harness = XMPPClientHarness { $0.mechanisms = [.scramSHA1, .plain] }
        harness.open(XMPPClientHarness.mechanisms(["SCRAM-SHA-1", "PLAIN"]))
        let challenge = harness.scramServer.challenge(forAuth: saslPayload(harness.lastSent))
        harness.scramServer.serverFirst += ",h=Y+xk2TW25vKwG9yWicfQlsuiFQs="
        harness.server(
            "<challenge xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>\(Base64.encode(Array(harness.scramServer.serverFirst.utf8)))</challenge>"
        )
        _ = challenge
        let (clientFinal, _) = harness.scramServer.final()
        #expect(saslPayload(harness.lastSent) == Base64.encode(Array(clientFinal.utf8)))
    }
}
