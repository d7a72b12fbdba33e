// Code of the rounds when `TetherDispatch` was the product with both clients in it: the product
// no longer has them, and each name says where it went.
import TetherDispatch

func connectBoth() {
    // expected-error@+1 {{XMPPClient is in the TetherXMPPClient product now}}
    let _: XMPPClient? = nil
    // expected-error@+1 {{HubConnection is in the TetherSignalRClient product now}}
    let _: HubConnection? = nil
    // expected-error@+1 {{HubConnectionBuilder is in the TetherSignalRClient product now}}
    let _: HubConnectionBuilder? = nil
}
