// The XMPP client of earlier rounds: its state moved into one value, its initializer throws.
import TetherXMPPClient

func xmpp(jid: JID) throws {
    var configuration = XMPPClient.Configuration(jid: jid, password: Secret("secret"))
    // expected-error@+1 {{the FAST token is part of the state now: configuration.state.fastToken}}
    configuration.fastToken = nil
    // expected-error@+1 {{use XMPPUserAgent(software:device:); the installation's id is XMPPClientState.userAgentID}}
    configuration.userAgent = XMPPUserAgent(id: "install-1", software: "App", device: "Phone")
    let agent = XMPPUserAgent(software: "App")
    // expected-error@+1 {{the installation's id is XMPPClientState.userAgentID now}}
    _ = agent.id
    // expected-error@+4 {{call can throw but is not marked with 'try'}}
    // expected-note@+3 {{did you mean to use 'try'?}}
    // expected-note@+2 {{did you mean to handle error as optional value?}}
    // expected-note@+1 {{did you mean to disable error propagation?}}
    _ = XMPPClient(configuration: configuration)
}
