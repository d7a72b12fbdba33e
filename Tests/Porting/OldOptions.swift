// Options of earlier rounds, each failing with what to write instead.
import TetherXMPPClient

func options() {
    var options = XMPPClient.Options()
    // expected-error@+1 {{'readBufferSize' has been renamed to 'maximumReadSize'}}
    options.readBufferSize = 4096
    // expected-error@+1 {{set logLevel = .trace, and logHandler to receive the lines}}
    options.trafficLog = { print($0) }
    // expected-error@+1 {{the hub protocol's maximumMessageSize (SignalR), parserLimits.maximumElementSize (XMPP)}}
    options.maximumMessageSize = 1 << 20
    // expected-error@+1 {{use .sharedThreads(count:) (or .default)}}
    options.socketReading = .threadPerSocket(limit: 64)
}
