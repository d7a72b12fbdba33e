import Testing
@_spi(TetherInternal) import TetherDispatch
import TetherSignalR
import TetherTestSupport
import TetherXMPP

@testable import TetherSignalRClient
@testable import TetherXMPPClient

/// What the clients do before the app configures anything: say nothing, and never show
/// credentials when asked to show their traffic.
struct DriverDefaultsTests {
    @Test func clientsAreSilentUnlessAsked() {
        #expect(HubConnection.Options().logLevel == .none)
        #expect(HubConnectionBuilder(url: "http://127.0.0.1:1/hub").options.logLevel == .none)
        #expect(XMPPClient.Options().logLevel == .none)
    }

    /// A connection that could never be made is refused when it is created, naming why.
    @Test func impossibleConfigurationsFailAtCreation() throws {
        expectThrows(\HubConnectionError.kind, .invalidConfiguration) {
            _ = try HubConnectionBuilder(url: "ftp://example.com/hub").build()
        }
        let error = expectThrows(\HubConnectionError.kind, .invalidConfiguration) {
            try HubConnection(configuration: .init(url: "http://127.0.0.1:1/hub", asksForAccessToken: true))
        }
        #expect(error?.message.contains("no token provider") == true, "\(String(describing: error))")
        // The builder keeps the token provider and the configuration in step.
        let builder = HubConnectionBuilder(url: "http://127.0.0.1:1/hub").withAccessTokenProvider { "token" }
        #expect(builder.configuration.asksForAccessToken)
        _ = try builder.build()
    }

    /// The traffic log keeps a SASL element's tags (the mechanism shows) and hides its content.
    @Test(arguments: [
        (
            "<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='SCRAM-SHA-256'>biwsbj1hbGljZSxyPWFiYw==</auth>",
            "<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='SCRAM-SHA-256'>"
                + "[24 bytes of credentials not shown]</auth>"
        ),
        (
            "<response xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>Yz1iaXdzLHI9YWJj</response>",
            "<response xmlns='urn:ietf:params:xml:ns:xmpp-sasl'>[16 bytes of credentials not shown]</response>"
        ),
        ("garbage without tags", "[20 bytes of credentials not shown]"),
    ])
    func saslContentIsHidden(element: String, logged: String) {
        #expect(ConnectionRunner<XMPPClientMachine, XMPPClient.Event>.hidingCredentials(Array(element.utf8)) == logged)
    }
}
