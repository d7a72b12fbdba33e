// What this module's API hands out comes with it: importing `TetherDispatch` is enough to use it
// (`DispatchQueue`, the machine kit, DNS records).
@_exported public import Dispatch
@_exported public import TetherCore
@_exported public import TetherDNS
