// simple-peer's prebuilt browser bundle exports the same constructor as its Node entry.
declare module 'simple-peer/simplepeer.min.js' {
  import SimplePeer from 'simple-peer';
  export default SimplePeer;
}
