import Testing
import TetherCore
import TetherXML

@testable import TetherXMPP

/// Stream negotiation against scripted servers: order, SASL, restarts, STARTTLS, binding.
struct NegotiationTests {
    @Test func plainLoginBindAndEnable() {
        let harness = XMPPClientHarness()
        harness.start()
        #expect(harness.transcript == ["open"])
        #expect(harness.endpoints == [Endpoint(host: "example.com", port: 5222)])
        harness.connected()
        #expect(harness.lastSent.hasPrefix("<?xml version='1.0'?><stream:stream to='example.com' version='1.0'"))
        #expect(!harness.lastSent.contains("from="))  // no from on a cleartext stream
        harness.server(XMPPClientHarness.serverHeader + XMPPClientHarness.mechanisms(["PLAIN"]))
        #expect(harness.state == .authenticating)
        // alice / secret-password, base64 of \0alice\0secret-password.
        #expect(
            harness.lastSent == "<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='PLAIN'>"
                + Base64.encode([0] + Array("alice".utf8) + [0] + Array("secret-password".utf8)) + "</auth>"
        )
        #expect(harness.sentWithCredentials.last == true)
        harness.server("<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>")
        #expect(harness.state == .openingStream)
        harness.server(XMPPClientHarness.serverHeader + XMPPClientHarness.boundFeatures)
        #expect(harness.state == .binding)
        #expect(harness.lastSent.contains("<bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'/>"))
        let bindID = harness.lastSentID
        harness.server(
            "<iq type='result' id='\(bindID)'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><jid>alice@example.com/x1</jid></bind></iq>"
        )
        #expect(harness.state == .connected)
        #expect(harness.jid == JID("alice@example.com/x1"))
        #expect(harness.lastSent == "<enable xmlns='urn:xmpp:sm:3' resume='true'/>")
        harness.server("<enabled xmlns='urn:xmpp:sm:3' id='abc' resume='true' max='600'/>")
        #expect(
            harness.transcript == [
                "open", "send:header", "send:auth", "event:authenticated", "send:header", "send:iq", "send:enable",
                "event:connected",
                "event:smenabled",
            ]
        )
        #expect(harness.events.contains(.streamManagementEnabled(resumable: true)))
        #expect(harness.smEnabled)
        // Credentials are flagged only on the <auth>.
        #expect(harness.sentWithCredentials.filter { $0 }.count == 1)
    }

    @Test func scramLoginVerifiesTheServer() {
        let harness = XMPPClientHarness { $0.mechanisms = [.scramSHA256, .scramSHA1, .plain] }
        harness.open(XMPPClientHarness.mechanisms(["SCRAM-SHA-1", "PLAIN"]))
        #expect(harness.lastSent.contains("mechanism='SCRAM-SHA-1'"))
        #expect(Base64.decode(saslPayload(harness.lastSent)) == Array("n,,n=alice,r=clientnonce".utf8))
        let challenge = harness.scramServer.challenge(forAuth: saslPayload(harness.lastSent))
        harness.server("<challenge xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>\(challenge)</challenge>")
        let (clientFinal, serverFinal) = harness.scramServer.final()
        #expect(Base64.decode(saslPayload(harness.lastSent)).map { String(decoding: $0, as: UTF8.self) } == clientFinal)
        #expect(harness.sentWithCredentials.last == true)
        harness.server(
            "<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>\(Base64.encode(Array(serverFinal.utf8)))</success>"
        )
        #expect(harness.state == .openingStream)
        #expect(harness.transcript.suffix(3) == ["send:response", "event:authenticated", "send:header"])
    }

    @Test func scramServerFinalAsAChallenge() {
        let harness = XMPPClientHarness { $0.mechanisms = [.scramSHA1] }
        harness.open(XMPPClientHarness.mechanisms(["SCRAM-SHA-1"]))
        let challenge = harness.scramServer.challenge(forAuth: saslPayload(harness.lastSent))
        harness.server("<challenge xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>\(challenge)</challenge>")
        let (_, serverFinal) = harness.scramServer.final()
        harness.server(
            "<challenge xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>\(Base64.encode(Array(serverFinal.utf8)))</challenge>"
        )
        #expect(harness.lastSent == "<response xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>")
        harness.server("<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>")
        #expect(harness.state == .openingStream)
    }

    @Test func aWrongServerSignatureIsFatal() throws {
        let harness = XMPPClientHarness { $0.mechanisms = [.scramSHA1] }
        harness.open(XMPPClientHarness.mechanisms(["SCRAM-SHA-1"]))
        let challenge = harness.scramServer.challenge(forAuth: saslPayload(harness.lastSent))
        harness.server("<challenge xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>\(challenge)</challenge>")
        let (_, serverFinal) = harness.scramServer.final(signatureTampered: true)
        harness.server(
            "<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>\(Base64.encode(Array(serverFinal.utf8)))</success>"
        )
        #expect(harness.state == .disconnected)
        #expect(
            harness.transcript.suffix(5) == [
                "send:abort", "send:footer", "close", "event:attemptfailed", "event:closed",
            ]
        )
        let error = try closedError(harness.events)
        #expect(error.kind == .serverAuthenticationFailed && error.isFatal)
        // No reconnect is scheduled.
        #expect(harness.timeout == nil)
    }

    @Test func successWithoutSignatureIsRejected() throws {
        let harness = XMPPClientHarness { $0.mechanisms = [.scramSHA1] }
        harness.open(XMPPClientHarness.mechanisms(["SCRAM-SHA-1"]))
        let challenge = harness.scramServer.challenge(forAuth: saslPayload(harness.lastSent))
        harness.server("<challenge xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>\(challenge)</challenge>")
        harness.server("<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>")
        let error = try closedError(harness.events)
        #expect(error.kind == .serverAuthenticationFailed)
    }

    @Test func authenticationFailureStopsWithoutRetrying() throws {
        let harness = XMPPClientHarness()
        harness.open(XMPPClientHarness.mechanisms(["PLAIN"]))
        harness.server(
            "<failure xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><not-authorized/><text xml:lang='en'>Unable to authorize you with the authentication credentials you&apos;ve sent.</text></failure>"
        )
        let error = try closedError(harness.events)
        #expect(error.kind == .authenticationFailed)
        #expect(error.saslCondition == "not-authorized")
        #expect(
            error.message
                == "Authentication failed (not-authorized): Unable to authorize you with the authentication credentials you've sent."
        )
        #expect(!error.message.contains("secret-password") && !"\(error)".contains("secret-password"))
        #expect(harness.state == .disconnected)
        #expect(harness.timeout == nil)
    }

    @Test func temporaryAuthFailureReconnects() {
        let harness = XMPPClientHarness()
        harness.open(XMPPClientHarness.mechanisms(["PLAIN"]))
        harness.server("<failure xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><temporary-auth-failure/></failure>")
        #expect(harness.state == .reconnectWaiting)
        #expect(harness.events.last?.reconnect == ReconnectStep(attempt: 1, delay: .seconds(1)))
    }

    @Test func plainIsRefusedOnCleartextUnlessAllowed() throws {
        let harness = XMPPClientHarness { $0.allowPlainOnCleartext = false }
        harness.open(XMPPClientHarness.mechanisms(["PLAIN"]))
        #expect(!harness.sent.contains { $0.text.contains("<auth") })
        let error = try closedError(harness.events)
        #expect(error.kind == .noAcceptableMechanism)
        #expect(error.message.contains("allowPlainOnCleartext"))
    }

    @Test func mechanismPreferenceOrder() {
        for (offered, expected) in [
            (["PLAIN", "SCRAM-SHA-1", "SCRAM-SHA-256", "SCRAM-SHA-512"], "SCRAM-SHA-512"),
            (["SCRAM-SHA-1", "PLAIN", "SCRAM-SHA-256"], "SCRAM-SHA-256"), (["PLAIN", "SCRAM-SHA-1"], "SCRAM-SHA-1"),
            (["PLAIN", "X-OAUTH2"], "PLAIN"),
        ] {
            let harness = XMPPClientHarness()
            harness.open(XMPPClientHarness.mechanisms(offered))
            #expect(harness.lastSent.contains("mechanism='\(expected)'"), "\(offered)")
        }
    }

    /// `<success/>` and the next stream header in one chunk: the restart happens at the exact
    /// byte, and the new header is parsed by the fresh parser.
    @Test func restartAtTheExactByte() {
        let harness = XMPPClientHarness()
        harness.open(XMPPClientHarness.mechanisms(["PLAIN"]))
        harness.server(
            "<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>" + XMPPClientHarness.serverHeader
                + XMPPClientHarness.boundFeatures
        )
        #expect(harness.state == .binding)
    }

    /// The whole negotiation fed one byte at a time gives the same transcript.
    @Test func byteByByte() {
        let harness = XMPPClientHarness()
        harness.start()
        harness.connected()
        func drip(_ text: String, _ harness: XMPPClientHarness) {
            for byte in Array(text.utf8) {
                harness.machine.transportReceived([byte], generation: harness.generation!, now: harness.now)
                harness.drain()
            }
        }
        drip(XMPPClientHarness.serverHeader + XMPPClientHarness.mechanisms(["PLAIN"]), harness)
        drip(
            "<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>" + XMPPClientHarness.serverHeader
                + XMPPClientHarness.boundFeatures,
            harness
        )
        let bindID = harness.lastSentID
        drip(
            "<iq type='result' id='\(bindID)'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><jid>alice@example.com/x</jid></bind></iq>",
            harness
        )
        #expect(harness.state == .connected)
        #expect(
            harness.transcript == [
                "open", "send:header", "send:auth", "event:authenticated", "send:header", "send:iq", "send:enable",
                "event:connected",
            ]
        )
    }

    @Test func bindRequestsTheConfiguredResource() {
        let harness = XMPPClientHarness { $0.resource = "phone" }
        harness.login()
        #expect(
            harness.sent.contains {
                $0.text.contains("<bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><resource>phone</resource></bind>")
            }
        )
        let fromJID = XMPPClientHarness { $0.jid = JID("alice@example.com/desk")! }
        fromJID.login()
        #expect(fromJID.sent.contains { $0.text.contains("<resource>desk</resource>") })
    }

    @Test func bindFailureIsFatal() throws {
        let harness = XMPPClientHarness()
        harness.authenticate(XMPPClientHarness.boundFeatures)
        harness.server(
            "<iq type='error' id='\(harness.lastSentID)'><error type='cancel'><not-allowed xmlns='urn:ietf:params:xml:ns:xmpp-stanzas'/></error></iq>"
        )
        let error = try closedError(harness.events)
        #expect(error.kind == .bindFailed && error.stanzaError?.condition == .notAllowed)
    }

    @Test func sessionOnlyWhenRequired() throws {
        let harness = XMPPClientHarness()
        harness.open(XMPPClientHarness.mechanisms(["PLAIN"]))
        harness.server("<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'/>")
        harness.server(
            XMPPClientHarness.serverHeader
                + "<stream:features><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'/><session xmlns='urn:ietf:params:xml:ns:xmpp-session'/></stream:features>"
        )
        harness.server(
            "<iq type='result' id='\(harness.lastSentID)'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><jid>alice@example.com/r</jid></bind></iq>"
        )
        #expect(harness.state == .binding)
        #expect(harness.lastSent.contains("<session xmlns='urn:ietf:params:xml:ns:xmpp-session'/>"))
        harness.server("<iq type='result' id='\(harness.lastSentID)'/>")
        #expect(harness.state == .connected)
        // No <enable/>: the server offered no stream management.
        #expect(!harness.sent.contains { $0.text.contains("<enable") })
    }

    @Test func startTLSWhenOffered() throws {
        let harness = XMPPClientHarness { $0.tls = .optional }
        harness.start()
        harness.connected()
        harness.server(
            XMPPClientHarness.serverHeader
                + "<stream:features><starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>\(XMPPClientHarness.mechanisms(["PLAIN"]).dropFirst(17).dropLast(18))</stream:features>"
        )
        #expect(harness.lastSent == "<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>")
        #expect(harness.state == .securing)
        // The bytes after <proceed/> belong to TLS, not to the XML parser.
        harness.server("<proceed xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>\u{16}\u{03}\u{03}")
        #expect(harness.transcript.last == "starttls")
        #expect(harness.tlsBuffered == [0x16, 0x03, 0x03])
        // Bytes now (before TLS is up) are not parsed as XML.
        harness.server("<garbage")
        #expect(harness.state == .securing)
        harness.machine.tlsEstablished(generation: harness.generation!, now: harness.now)
        harness.drain()
        #expect(harness.lastSent.contains("from='alice@example.com'"))
        harness.server(XMPPClientHarness.serverHeader + XMPPClientHarness.mechanisms(["PLAIN"]))
        #expect(harness.lastSent.contains("mechanism='PLAIN'"))
    }

    @Test func tlsPolicies() throws {
        // Required, not offered.
        let required = XMPPClientHarness { $0.tls = .required }
        required.open(XMPPClientHarness.mechanisms(["PLAIN"]))
        let error = try closedError(required.events)
        #expect(error.kind == .tlsUnavailable && error.isFatal)
        // Required by the server, disabled here.
        let disabled = XMPPClientHarness { $0.tls = .disabled }
        disabled.start()
        disabled.connected()
        disabled.server(
            XMPPClientHarness.serverHeader
                + "<stream:features><starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'><required/></starttls></stream:features>"
        )
        let other = try closedError(disabled.events)
        #expect(other.kind == .tlsUnavailable)
        // Offered but not required, disabled here: cleartext goes on.
        let cleartext = XMPPClientHarness { $0.tls = .disabled }
        cleartext.start()
        cleartext.connected()
        cleartext.server(
            XMPPClientHarness.serverHeader
                + "<stream:features><starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>PLAIN</mechanism></mechanisms></stream:features>"
        )
        #expect(cleartext.lastSent.contains("<auth"))
        // STARTTLS refused by the server.
        let refused = XMPPClientHarness { $0.tls = .required }
        refused.start()
        refused.connected()
        refused.server(
            XMPPClientHarness.serverHeader
                + "<stream:features><starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/></stream:features>"
        )
        refused.server("<failure xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>")
        let failed = try closedError(refused.events)
        #expect(failed.kind == .tlsUnavailable)
    }

    @Test func directTLS() throws {
        let harness = XMPPClientHarness {
            $0.tls = .direct
            $0.allowPlainOnCleartext = false
        }
        harness.start()
        #expect(harness.endpoints == [Endpoint(host: "example.com", port: 5223)])
        #expect(harness.directTLSNames == ["example.com"])
        harness.connected()
        // Protected from the first header: it names the account, and PLAIN is acceptable.
        #expect(harness.lastSent.contains("from='alice@example.com'"))
        harness.server(XMPPClientHarness.serverHeader + XMPPClientHarness.mechanisms(["PLAIN"]))
        #expect(harness.lastSent.contains("mechanism='PLAIN'"))
        // A TLS failure is fatal.
        harness.machine.transportClosed(
            generation: harness.generation!,
            error: TransportError(.tlsFailed, "certificate verify failed: hostname mismatch"),
            now: harness.now
        )
        harness.drain()
        let error = try closedError(harness.events)
        #expect(error.kind == .tlsFailed && error.isFatal)
        #expect(error.message == "TLS failed: certificate verify failed: hostname mismatch")
    }

    @Test func unknownRequiredFeatureFails() throws {
        let harness = XMPPClientHarness()
        harness.start()
        harness.connected()
        harness.server(
            XMPPClientHarness.serverHeader
                + "<stream:features><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>PLAIN</mechanism></mechanisms><frob xmlns='urn:example:frob'><required/></frob></stream:features>"
        )
        let error = try closedError(harness.events)
        #expect(error.kind == .unsupportedRequiredFeature)
        #expect(error.message.contains("urn:example:frob"))
    }

    @Test(arguments: [
        (
            "<?xml version='1.0'?><stream:stream xmlns='jabber:server' xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>",
            "invalid-namespace"
        ),
        (
            "<?xml version='1.0'?><stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams'>",
            "unsupported-version"
        ),
        (
            "<?xml version='1.0'?><stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' version='1.0'><!-- c -->",
            "restricted-xml"
        ),
        (
            "<?xml version='1.0'?><stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' version='1.0'><a></b>",
            "not-well-formed"
        ),
    ])
    func badServerStreams(_ input: String, _ condition: String) {
        let harness = XMPPClientHarness()
        harness.start()
        harness.connected()
        harness.server(input)
        #expect(harness.sent.last?.text.contains("<\(condition) xmlns='urn:ietf:params:xml:ns:xmpp-streams'/>") == true)
        #expect(harness.sent.last?.text.hasSuffix("</stream:stream>") == true)
        #expect(
            harness.transcript.suffix(4) == ["send:stream-error", "close", "event:attemptfailed", "event:reconnecting"]
        )
        guard case .lifecycle(.attemptFailed(let error)) = harness.events.dropLast().last else {
            Issue.record("no failure")
            return
        }
        #expect(error.kind == .protocolViolation)
        #expect(error.streamError?.condition.rawValue == condition)
    }

    @Test func streamErrorsDuringNegotiation() throws {
        let harness = XMPPClientHarness()
        harness.start()
        harness.connected()
        harness.server(
            XMPPClientHarness.serverHeader
                + "<stream:error><host-unknown xmlns='urn:ietf:params:xml:ns:xmpp-streams'/></stream:error></stream:stream>"
        )
        let error = try closedError(harness.events)
        #expect(error.kind == .streamError && error.streamError?.condition == .hostUnknown && error.isFatal)
    }

    @Test func passwordNeverInDescriptions() {
        let harness = XMPPClientHarness()
        let configuration = harness.machine.configuration
        #expect(!"\(configuration)".contains("secret-password"))
        #expect(!String(reflecting: configuration).contains("secret-password"))
        #expect("\(configuration.password)" == "<redacted>")
    }

    // MARK: - Channel binding

    /// TLS 1.2 bindings as the driver reports them after STARTTLS.
    static let tls12 = TLSChannelBindings(
        protocolVersion: "TLSv1.2",
        data: [.tlsUnique: Array(1...12), .tlsServerEndPoint: Array(repeating: 7, count: 32)]
    )

    /// Connects with STARTTLS; TLS is established with `tls`; the server then offers `features`.
    func secured(_ harness: XMPPClientHarness, tls: TLSChannelBindings, features: String) {
        harness.start()
        harness.connected()
        harness.server(
            XMPPClientHarness.serverHeader
                + "<stream:features><starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'><required/></starttls></stream:features>"
        )
        harness.server("<proceed xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>")
        harness.machine.tlsEstablished(generation: harness.generation!, tls: tls, now: harness.now)
        harness.drain()
        harness.server(XMPPClientHarness.serverHeader + features)
    }

    @Test func scramPlusBindsTheLoginToTheTLSConnection() throws {
        let harness = XMPPClientHarness {
            $0.tls = .required
            $0.channelBinding = .required
        }
        secured(harness, tls: Self.tls12, features: XMPPClientHarness.mechanisms(["SCRAM-SHA-1", "SCRAM-SHA-1-PLUS"]))
        #expect(harness.lastSent.contains("mechanism='SCRAM-SHA-1-PLUS'"))
        let clientFirst = String(decoding: Base64.decode(saslPayload(harness.lastSent))!, as: UTF8.self)
        #expect(clientFirst == "p=tls-unique,,n=alice,r=clientnonce")
        harness.scramServer.bindingData = Array(1...12)  // the server's view of the same connection
        let challenge = harness.scramServer.challenge(forAuth: saslPayload(harness.lastSent))
        harness.server("<challenge xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>\(challenge)</challenge>")
        let (clientFinal, serverFinal) = harness.scramServer.final()
        #expect(saslPayload(harness.lastSent) == Base64.encode(Array(clientFinal.utf8)))
        harness.server(
            "<success xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>\(Base64.encode(Array(serverFinal.utf8)))</success>"
        )
        harness.server(XMPPClientHarness.serverHeader + XMPPClientHarness.boundFeatures)
        harness.server(
            "<iq type='result' id='\(harness.lastSentID)'><bind xmlns='urn:ietf:params:xml:ns:xmpp-bind'><jid>alice@example.com/phone</jid></bind></iq>"
        )
        harness.server("<enabled xmlns='urn:xmpp:sm:3' id='sm-1' resume='true' max='600'/>")
        #expect(harness.state == .connected)
        #expect(
            harness.machine.authentication
                == XMPPAuthentication(mechanism: "SCRAM-SHA-1-PLUS", channelBinding: .tlsUnique)
        )
        // The binding data never reaches the transcript's text in clear form other than inside
        // the SCRAM messages, and no event carries it.
        #expect(!harness.events.contains { "\($0)".contains("tlsUnique:") })
    }

    @Test func aServerThatListsNoPLUSGetsTheYFlag() {
        let harness = XMPPClientHarness { $0.tls = .required }
        secured(harness, tls: Self.tls12, features: XMPPClientHarness.mechanisms(["SCRAM-SHA-1", "PLAIN"]))
        #expect(harness.lastSent.contains("mechanism='SCRAM-SHA-1'"))
        let clientFirst = String(decoding: Base64.decode(saslPayload(harness.lastSent))!, as: UTF8.self)
        #expect(clientFirst == "y,,n=alice,r=clientnonce")
    }

    @Test func requiredChannelBindingFailsWithoutPLUS() throws {
        let harness = XMPPClientHarness {
            $0.tls = .required
            $0.channelBinding = .required
        }
        secured(harness, tls: Self.tls12, features: XMPPClientHarness.mechanisms(["SCRAM-SHA-1", "PLAIN"]))
        let error = try closedError(harness.events)
        #expect(error.kind == .channelBindingUnavailable && error.isFatal)
        #expect(error.message.contains("offers no -PLUS mechanism"))
        #expect(!harness.sent.contains { $0.text.contains("<auth") })
    }

    @Test func theServersChannelBindingListIsRead() {
        let harness = XMPPClientHarness { $0.tls = .required }
        let features =
            "<stream:features><mechanisms xmlns='urn:ietf:params:xml:ns:xmpp-sasl'><mechanism>SCRAM-SHA-1-PLUS</mechanism><mechanism>SCRAM-SHA-1</mechanism></mechanisms><sasl-channel-binding xmlns='urn:xmpp:sasl-cb:0'><channel-binding type='tls-server-end-point'/></sasl-channel-binding></stream:features>"
        secured(harness, tls: Self.tls12, features: features)
        let clientFirst = String(decoding: Base64.decode(saslPayload(harness.lastSent))!, as: UTF8.self)
        #expect(clientFirst == "p=tls-server-end-point,,n=alice,r=clientnonce")
    }
}
